#include "client/commands.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/access_commands.h"
#include "client/command.h"
#include "client/command_line.h"
#include "client/compare_commands.h"
#include "client/completion_script.h"
#include "client/experiment_commands.h"
#include "client/fleet_sweep_commands.h"
#include "client/gpu_commands.h"
#include "client/invocation.h"
#include "client/kernel_commands.h"
#include "client/node_fanout.h"
#include "client/report_command.h"
#include "client/table.h"
#include "client/token_command.h"
#include "common/version.h"

namespace gpuprof::client {
namespace {

constexpr absl::string_view kExitCodeHelp =
    "exit codes:\n"
    "  0  success (submit --follow, watch: the experiment finished)\n"
    "  1  the experiment failed, was cancelled, timed out or was interrupted, or the stream\n"
    "     ended first; health: the daemon is not serving\n"
    "  2  bad command line, or the daemon rejected the request (INVALID_ARGUMENT, NOT_FOUND,\n"
    "     FAILED_PRECONDITION, ...); submit --follow, watch: the custom kernel did not compile\n"
    "  3  the daemon cannot be reached (UNAVAILABLE)\n"
    "  4  any other error\n"
    "  5  compare --fail-on-regression: B is worse than A beyond the limit\n"
    "  6  across a fleet: some nodes did not answer in time or failed; the output covers the\n"
    "     others and names the missing ones\n";

int RunHelp(const Invocation& invocation, const std::vector<std::string>& args);
int RunCompletion(const Invocation& invocation, const std::vector<std::string>& args);

constexpr absl::string_view kCompletionHelp =
    "usage: gpuprof completion bash|zsh\n\n"
    "Prints a completion script for commands, subcommands, workloads and flags, made from the\n"
    "same tables the CLI parses with. Load it in your shell's startup file:\n"
    "  bash:  source <(gpuprof completion bash)\n"
    "  zsh:   source <(gpuprof completion zsh)\n";

// How many words at args[at] are an output flag that may come before the command (--json,
// --format F, --no-headers, -q): nullopt when it is none, 0 when its value is missing.
std::optional<size_t> OutputFlagWords(const std::vector<std::string>& args, size_t at) {
  const std::string& word = args[at];
  for (absl::string_view flag : {"--json", "--no-headers", "--quiet", "-q"}) {
    if (word == flag || absl::StartsWith(word, absl::StrCat(flag, "="))) return 1;
  }
  if (absl::StartsWith(word, "--format=")) return 1;
  if (word == "--format") return at + 1 < args.size() ? 2 : 0;
  return std::nullopt;
}

// Every command, in the order `gpuprof help` lists them.
const std::vector<Command>& Commands() {
  static const auto* const commands = new std::vector<Command>{
      GpusCommand(),
      SubmitCommand(),
      WatchCommand(),
      ListCommand(),
      GetCommand(),
      TraceCommand(),
      StoryCommand(),
      ReportCommand(),
      SassCommand(),
      CancelCommand(),
      GpuCommand(),
      WhoAmICommand(),
      QuotaCommand(),
      AuditCommand(),
      HealthCommand(),
      SweepCommand(),
      CompareCommand(),
      BoardCommand(),
      BaselineCommand(),
      TokenHashCommand(),
      {.name = "completion",
       .summary = "bash or zsh completion: source <(gpuprof completion bash)",
       .run_args = RunCompletion,
       .help = [](const ClientEnvironment& env, const std::vector<std::string>&) {
         *env.out << kCompletionHelp;
         return int{kExitOk};
       },
       .local = true},
      {.name = "help",
       .summary = "this text, or a command's: gpuprof help submit index, gpuprof help sweep get",
       .run_args = RunHelp,
       .local = true},
  };
  return *commands;
}

const Command* FindCommand(absl::string_view name) {
  for (const Command& command : Commands()) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

// "unknown command "lsit" (did you mean list?); run gpuprof help".
std::string UnknownCommandMessage(absl::string_view typed) {
  std::vector<std::string> names;
  for (const Command& command : Commands()) names.emplace_back(command.name);
  const std::string closest = ClosestName(typed, names);
  return absl::StrCat("unknown command \"", typed, "\"",
                      closest.empty() ? "" : absl::StrCat(" (did you mean ", closest, "?)"),
                      "; run gpuprof help");
}

int RunCompletion(const Invocation& invocation, const std::vector<std::string>& args) {
  const ClientEnvironment& env = invocation.env;
  if (args.size() != 1 || (args[0] != "bash" && args[0] != "zsh")) {
    if (args.size() == 1 && args[0] == "--help") {
      *env.out << kCompletionHelp;
      return kExitOk;
    }
    return ReportUsageError(env, "usage: gpuprof completion bash|zsh", "completion");
  }
  *env.out << CompletionScript(args[0] == "bash" ? Shell::kBash : Shell::kZsh, Commands());
  return kExitOk;
}

std::string MainHelp() {
  TextTable commands;
  for (const Command& command : Commands()) {
    commands.AddRow({std::string(command.name), std::string(command.summary)});
  }
  const std::vector<FlagSpec> global_flags = {
      TargetFlag(),
      {.name = "target NAME=ADDR",
       .help = "several --target make a fleet; NAME qualifies its ids (NAME/exp-000042)"},
      {.name = "fleet[=PATH]",
       .help = "the daemons of a fleet file (default ~/.config/gpuprof/fleet.textproto; "
               "also $GPUPROF_FLEET)"},
      {.name = "node", .value_syntax = "NAME[,NAME]", .help = "only these nodes of the fleet"},
      {.name = "node-timeout",
       .value_syntax = "DURATION",
       .help = "how long each node may take to answer (default: the fleet file's, else 10s)"},
      {.name = "user",
       .value_syntax = "NAME",
       .help = "act for this user (admins only; the daemon authenticates everyone else as "
               "who they are)"},
      {.name = "tls-ca",
       .value_syntax = "FILE",
       .help = "PEM CA of the daemon's certificate: connect with TLS"},
      {.name = "tls-cert", .value_syntax = "FILE", .help = "PEM client certificate (mutual TLS)"},
      {.name = "tls-key", .value_syntax = "FILE", .help = "PEM key of --tls-cert"},
      {.name = "token",
       .value_syntax = "FILE",
       .help = "file holding a bearer token (TLS only; or $GPUPROF_TOKEN); gpuprof token-hash "
               "gives the policy entry for it"},
      {.name = "version", .is_switch = true, .help = "print the client's version"},
      HelpFlag(),
  };
  return absl::StrCat(
      "gpuprof ", GpuprofVersion(),
      ": run GPU profiling experiments on a gpuprofd daemon and read their results\n\n"
      "usage: gpuprof [--target ADDR | --target NAME=ADDR... | --fleet[=PATH]] [--node NAME]\n"
      "               [--user NAME] [--tls-ca FILE [--tls-cert FILE --tls-key FILE]]\n"
      "               [--token FILE] <command> [args] [flags]\n\n"
      "Across a fleet, gpus, list, get, watch, cancel and health work on every node at once;\n"
      "sweep spreads its points over the nodes (gpuprof --fleet sweep --help) and compare\n"
      "matches results across them; other commands need one node (--node NAME). The TLS\n"
      "files and token apply to every node; a node of a fleet file with its own TLS files\n"
      "uses those.\n\n"
      "commands:\n",
      commands.Render("  "), "\nglobal flags (before the command; --target also after it):\n",
      FormatFlagHelp(global_flags),
      "\nThe connection can also be set in ~/.config/gpuprof/config.textproto (or\n"
      "$GPUPROF_CONFIG): target, tls_ca, tls_cert, tls_key, token_file; flags and\n"
      "$GPUPROF_TARGET / $GPUPROF_TOKEN win over it.\n"
      "\noutput for scripts: --json, --format F, -q and --no-headers may also come before the\n"
      "command. --json prints one JSON object per line (NDJSON) wherever there are several:\n"
      "listings (list, sweep list, baseline list, audit) one item per line, streams (submit\n"
      "--follow, watch) one event per line, compare one point per line. Hints (the next\n"
      "page's token, damaged rows, compare's summary) go to stderr. The JSON follows the\n"
      "proto3 JSON mapping: lowerCamelCase names, enums by name, 64-bit integers as strings,\n"
      "fields at their default value left out. -q prints only ids, --no-headers a table\n"
      "without its header line. gpuprof get ID --command prints the submit line that runs\n"
      "an experiment again.\n\n",
      kExitCodeHelp);
}

// Whether `count` positionals suit the command: exactly its own, or more when the last is a
// list ("ID...").
bool PositionalsFit(const Command& command, size_t count) {
  const bool list = !command.positionals.empty() && absl::EndsWith(command.positionals.back(), "...");
  return list ? count >= command.positionals.size() : count == command.positionals.size();
}

// Parses a command's flags and positionals and runs it.
int RunCommand(const Command& command, const Invocation& invocation,
               const std::vector<std::string>& args) {
  const ClientEnvironment& env = invocation.env;
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, command.flags());
  if (!parsed.ok()) return ReportUsageError(env, parsed.status().message(), command.name);
  if (parsed->Switch("help")) {
    *env.out << CommandHelp(command);
    return kExitOk;
  }
  if (!PositionalsFit(command, parsed->positionals.size())) {
    const std::string message =
        parsed->positionals.size() < command.positionals.size()
            ? absl::StrCat(command.name, " needs ", absl::StrJoin(command.positionals, " "),
                           ": gpuprof ", command.usage)
            : absl::StrCat("unexpected argument \"",
                           parsed->positionals[command.positionals.size()], "\"");
    return ReportUsageError(env, message, command.name);
  }
  absl::StatusOr<Session> made = invocation.MakeSession(*parsed);
  if (!made.ok()) return ReportUsageError(env, made.status().message(), "");
  Session& session = *made;
  return command.run(session, *parsed);
}

// A command across several nodes.
int RunFleetCommand(const Command& command, Fleet& fleet, const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, command.flags());
  if (!parsed.ok()) return ReportUsageError(fleet.env(), parsed.status().message(), command.name);
  if (parsed->Switch("help")) {
    *fleet.env().out << CommandHelp(command);
    return kExitOk;
  }
  if (parsed->Has("target")) {
    return ReportUsageError(fleet.env(), "a command's --target and a fleet exclude each other",
                            command.name);
  }
  if (!PositionalsFit(command, parsed->positionals.size())) {
    return ReportUsageError(fleet.env(),
                            absl::StrCat(command.name, " takes ", command.positionals.size(),
                                         " argument(s): gpuprof ", command.usage),
                            command.name);
  }
  if (command.run_on_fleet != nullptr)
    return command.run_on_fleet(fleet, command, *std::move(parsed));
  return ReportUsageError(
      fleet.env(), absl::StrCat(command.name, " works on one node: pick it with --node NAME"),
      command.name);
}

int RunHelp(const Invocation& invocation, const std::vector<std::string>& args) {
  const ClientEnvironment& env = invocation.env;
  const Command* command = args.empty() ? nullptr : FindCommand(args[0]);
  if (args.empty() || (command != nullptr && command->name == "help")) {
    *env.out << MainHelp();
    return kExitOk;
  }
  if (command == nullptr) return ReportUsageError(env, UnknownCommandMessage(args[0]), "");
  if (command->help != nullptr) {
    return command->help(env, std::vector<std::string>(args.begin() + 1, args.end()));
  }
  *env.out << CommandHelp(*command);
  return kExitOk;
}

}  // namespace

int RunGpuprof(const std::vector<std::string>& args, const ClientEnvironment& env) {
  Invocation invocation{.env = env};
  GlobalOptions& globals = invocation.globals;
  size_t next = 0;
  // Output flags before the command are the command's own: `gpuprof --json list`.
  std::vector<std::string> output_flags;
  // Options before the command: --target, --user, --help, --version.
  while (next < args.size() && absl::StartsWith(args[next], "-")) {
    const std::string& word = args[next];
    if (word == "--help" || word == "-h") {
      *env.out << MainHelp();
      return kExitOk;
    }
    if (const std::optional<size_t> taken = OutputFlagWords(args, next); taken.has_value()) {
      if (*taken == 0) {
        return ReportUsageError(env, absl::StrCat(word, " needs a value"), "");
      }
      output_flags.insert(output_flags.end(), args.begin() + next, args.begin() + next + *taken);
      next += *taken;
      continue;
    }
    if (word == "--version") {
      *env.out << "gpuprof " << GpuprofVersion() << "\n";
      return kExitOk;
    }
    struct ValueOption {
      absl::string_view name;
      std::optional<std::string>* value;
    };
    if (word == "--fleet") {
      globals.fleet = "";
      ++next;
      continue;
    }
    bool matched = false;
    for (const ValueOption& option :
         {ValueOption{"--target", &globals.target}, ValueOption{"--user", &globals.user},
          ValueOption{"--fleet", &globals.fleet}, ValueOption{"--node", &globals.node},
          ValueOption{"--node-timeout", &globals.node_timeout},
          ValueOption{"--tls-ca", &globals.tls_ca}, ValueOption{"--tls-cert", &globals.tls_cert},
          ValueOption{"--tls-key", &globals.tls_key},
          ValueOption{"--token", &globals.token_file}}) {
      if (word == option.name) {
        if (next + 1 >= args.size()) {
          return ReportUsageError(env, absl::StrCat(option.name, " needs a value"), "");
        }
        *option.value = args[++next];
        matched = true;
      } else if (absl::StartsWith(word, absl::StrCat(option.name, "="))) {
        *option.value = word.substr(option.name.size() + 1);
        matched = true;
      }
    }
    if (!matched) {
      return ReportUsageError(env, absl::StrCat("unknown flag ", word, " before the command"), "");
    }
    if (absl::StartsWith(word, "--target")) globals.targets.push_back(*globals.target);
    ++next;
  }
  if (next >= args.size()) {
    *env.err << MainHelp();
    return kExitUsage;
  }
  const std::string& name = args[next];
  const Command* command = FindCommand(name);
  std::vector<std::string> rest(args.begin() + next + 1, args.end());
  // Before a "--" that ends the flags, if any.
  rest.insert(std::find(rest.begin(), rest.end(), "--"), output_flags.begin(), output_flags.end());
  // "-h" and "-q" are the single-dash flags people type out of habit.
  for (std::string& word : rest) {
    if (word == "-h") word = "--help";
    if (word == "-q") word = "--quiet";
    if (word == "-o" && command != nullptr && command->short_o_is_output) word = "--output";
  }
  // Local: needs no daemon, so nothing about the connection may stop it.
  if (command != nullptr && command->local) return command->run_args(invocation, rest);
  // `sweep ... --fleet[=PATH]` and `compare ... --fleet[=PATH]`: the same as before the command.
  if (command != nullptr && command->run_args_on_fleet != nullptr) {
    for (auto word = rest.begin(); word != rest.end();) {
      if (*word == "--fleet" || absl::StartsWith(*word, "--fleet=")) {
        globals.fleet = *word == "--fleet" ? "" : word->substr(8);
        word = rest.erase(word);
      } else {
        ++word;
      }
    }
  }
  if (const absl::Status nodes = invocation.ResolveNodes(); !nodes.ok()) {
    return ReportUsageError(env, nodes.message(), "");
  }
  if (command == nullptr) return ReportUsageError(env, UnknownCommandMessage(name), "");
  const bool spread = command->run_args_on_fleet != nullptr && invocation.SpreadsOverFleet();
  if (command->run_args != nullptr && !spread && invocation.nodes.size() > 1) {
    return ReportUsageError(env, absl::StrCat(name, " runs on one node: pick it with --node NAME"),
                            "");
  }
  if (command->run_args != nullptr && !spread) return command->run_args(invocation, rest);
  if (command->run != nullptr && invocation.nodes.size() <= 1) {
    return RunCommand(*command, invocation, rest);
  }
  absl::StatusOr<Fleet> fleet = invocation.MakeFleet();
  if (!fleet.ok()) return ReportUsageError(env, fleet.status().message(), "");
  if (spread) return command->run_args_on_fleet(*fleet, rest);
  return RunFleetCommand(*command, *fleet, rest);
}

}  // namespace gpuprof::client
