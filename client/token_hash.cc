#include "client/token_hash.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/connection_options.h"

namespace gpuprof::client {
namespace {

constexpr size_t kTokenBytes = 32;

std::string ErrnoText(int error) { return std::strerror(error); }

}  // namespace

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) absl::StrAppendFormat(&hex, "%02x", digest[i]);
  return hex;
}

absl::StatusOr<std::string> TokenAsSent(absl::string_view contents, absl::string_view source) {
  const absl::string_view token = absl::StripAsciiWhitespace(contents);
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": holds no token (it is empty)"));
  }
  if (absl::Status sendable = CheckHeaderValue(source, token, /*show_value=*/false);
      !sendable.ok()) {
    return sendable;
  }
  return std::string(token);
}

absl::StatusOr<std::string> PolicyTokenLine(absl::string_view user, absl::string_view sha256_hex) {
  if (user.empty()) return absl::InvalidArgumentError("--user-name: must name a user");
  for (size_t i = 0; i < user.size(); ++i) {
    const char c = user[i];
    if (absl::ascii_isspace(c) || absl::ascii_iscntrl(c) || c == '"' || c == '\\' || c == '(' ||
        c == ')') {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--user-name \"%s\": byte %d (%s) is not allowed; a policy user name has no "
          "whitespace, control characters, quotes, backslashes or parentheses",
          absl::CEscape(user), i, absl::CEscape(absl::string_view(&user[i], 1))));
    }
  }
  return absl::StrFormat("tokens { user: \"%s\" sha256: \"%s\" }", user, sha256_hex);
}

absl::StatusOr<std::string> GenerateToken() {
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot open /dev/urandom: ", ErrnoText(errno)));
  }
  unsigned char bytes[kTokenBytes];
  size_t got = 0;
  while (got < kTokenBytes) {
    const ssize_t n = read(fd, bytes + got, kTokenBytes - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      close(fd);
      return absl::UnavailableError(absl::StrCat("cannot read /dev/urandom: ", ErrnoText(error)));
    }
    got += static_cast<size_t>(n);
  }
  close(fd);
  return absl::WebSafeBase64Escape(
      absl::string_view(reinterpret_cast<const char*>(bytes), kTokenBytes));
}

absl::Status WriteNewTokenFile(const std::string& path, absl::string_view token) {
  // O_EXCL: never replace a file (someone else's token, a link planted in a shared directory).
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int error = errno;
    if (error == EEXIST) {
      return absl::AlreadyExistsError(
          absl::StrCat(path,
                       " already exists; --generate writes a new file and never replaces one (pick "
                       "another name, or remove it first)"));
    }
    return absl::InvalidArgumentError(absl::StrCat("cannot create ", path, ": ", ErrnoText(error)));
  }
  // The umask may only take bits away from 0600; make the mode exact anyway.
  const std::string contents = absl::StrCat(token, "\n");
  bool ok = fchmod(fd, 0600) == 0;
  for (size_t written = 0; ok && written < contents.size();) {
    const ssize_t n = write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) written += static_cast<size_t>(n);
  }
  ok = ok && fsync(fd) == 0;
  const int error = errno;
  close(fd);
  if (!ok) {
    unlink(path.c_str());
    return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", ErrnoText(error)));
  }
  return absl::OkStatus();
}

}  // namespace gpuprof::client
