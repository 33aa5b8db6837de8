#include "client/token_command.h"

#include <istream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/command_line.h"
#include "client/connection_options.h"
#include "client/token_hash.h"
#include "common/terminal_text.h"

namespace gpuprof::client {
namespace {

std::vector<FlagSpec> TokenHashFlags() {
  return {{.name = "user-name",
           .value_syntax = "NAME",
           .help = "also print the policy entry for NAME: tokens { user: \"NAME\" sha256: ... }"},
          {.name = "generate",
           .is_switch = true,
           .help = "make a new random token into FILE (mode 0600; FILE must not exist) instead "
                   "of reading one; needs --user-name"},
          {.name = "help", .is_switch = true, .help = "show this help"}};
}

int Usage(const ClientEnvironment& env, absl::string_view message) {
  return ReportUsageError(env, message, "token-hash");
}

// Prints the hash and, for a user name, the policy line.
int PrintHash(const ClientEnvironment& env, const std::string& token,
              const std::optional<std::string>& user) {
  const std::string hash = Sha256Hex(token);
  std::string line;
  if (user.has_value()) {
    absl::StatusOr<std::string> entry = PolicyTokenLine(*user, hash);
    if (!entry.ok()) return Usage(env, entry.status().message());
    line = *entry;
  }
  *env.out << hash << "\n";
  if (!line.empty()) *env.out << line << "\n";
  return kExitOk;
}

}  // namespace

std::string TokenHashHelp() {
  return absl::StrCat(
      "usage: gpuprof token-hash [FILE | -] [--user-name NAME]\n"
      "       gpuprof token-hash --generate FILE --user-name NAME\n\n"
      "Prints the SHA-256 of a bearer token as 64 lower-case hex digits: what gpuprofd's\n"
      "policy stores (tokens { user: \"NAME\" sha256: \"...\" }), never the token itself.\n"
      "The token is read from FILE, from stdin for \"-\", else from $GPUPROF_TOKEN, else from\n"
      "stdin. Surrounding whitespace is dropped, as the CLI drops it when it sends the token\n"
      "(--token FILE), so the hash is the one of `printf %s \"$TOKEN\" | sha256sum`. With\n"
      "--user-name NAME a second line is the policy entry to paste into the daemon's policy\n"
      "file (then kill -HUP gpuprofd).\n\n"
      "--generate makes a new token instead: 32 random bytes from /dev/urandom in base64url,\n"
      "written to FILE, which must not exist, with mode 0600. It prints the hash and the\n"
      "policy entry; the token itself is only in FILE (give it to its user: gpuprof --tls-ca\n"
      "CA --token FILE ...; tokens are accepted over TLS only).\n\n"
      "token-hash runs locally: it never connects to a daemon.\n\nflags:\n",
      FormatFlagHelp(TokenHashFlags()));
}

int RunTokenHashCommand(const std::vector<std::string>& args, const ClientEnvironment& env) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, TokenHashFlags());
  if (!parsed.ok()) return Usage(env, parsed.status().message());
  if (parsed->Switch("help")) {
    *env.out << TokenHashHelp();
    return kExitOk;
  }
  if (parsed->positionals.size() > 1) {
    return Usage(env, absl::StrCat("unexpected argument \"", parsed->positionals[1],
                                   "\": token-hash takes at most one FILE"));
  }
  const std::optional<std::string> user = parsed->Get("user-name");
  const std::optional<std::string> file =
      parsed->positionals.empty() ? std::nullopt : std::optional(parsed->positionals[0]);

  if (parsed->Switch("generate")) {
    if (!file.has_value() || *file == "-") {
      return Usage(env, "--generate needs the FILE to write the new token to");
    }
    if (!user.has_value()) {
      return Usage(env,
                   "--generate needs --user-name NAME: the policy entry names who the "
                   "token is for");
    }
    // Checked before anything is written: a refused name leaves no token file behind.
    if (absl::StatusOr<std::string> entry = PolicyTokenLine(*user, ""); !entry.ok()) {
      return Usage(env, entry.status().message());
    }
    absl::StatusOr<std::string> token = GenerateToken();
    if (!token.ok()) {
      *env.err << "error: " << token.status().message() << "\n";
      return kExitOtherError;
    }
    if (absl::Status written = WriteNewTokenFile(*file, *token); !written.ok()) {
      return Usage(env, written.message());
    }
    *env.err << "wrote a new token to " << EscapeForTerminal(*file)
             << " (mode 0600); add the entry below to the daemon's policy\n";
    return PrintHash(env, *token, user);
  }

  std::string contents;
  std::string source;
  if (file.has_value() && *file != "-") {
    absl::StatusOr<std::string> read = ReadFileForFlag(*file, "token-hash");
    if (!read.ok()) return Usage(env, read.status().message());
    contents = *std::move(read);
    source = *file;
  } else if (!file.has_value() && !env.token_from_env.empty()) {
    contents = env.token_from_env;
    source = "$GPUPROF_TOKEN";
  } else {
    if (env.in == nullptr) return Usage(env, "no token: give FILE, - (stdin) or $GPUPROF_TOKEN");
    std::stringstream read;
    read << env.in->rdbuf();
    contents = read.str();
    source = "stdin";
  }
  absl::StatusOr<std::string> token = TokenAsSent(contents, source);
  if (!token.ok()) return Usage(env, token.status().message());
  return PrintHash(env, *token, user);
}

namespace {

int RunTokenHash(const Invocation& invocation, const std::vector<std::string>& args) {
  return RunTokenHashCommand(args, invocation.env);
}

int TokenHashHelpCommand(const ClientEnvironment& env, const std::vector<std::string>&) {
  *env.out << TokenHashHelp();
  return kExitOk;
}

}  // namespace

Command TokenHashCommand() {
  return {.name = "token-hash",
          .summary = "a bearer token's SHA-256 for the daemon's policy, or a new token (local)",
          .run_args = RunTokenHash,
          .help = TokenHashHelpCommand,
          .local = true};
}

}  // namespace gpuprof::client
