// Bearer tokens for the access policy (`gpuprof token-hash`): the daemon's policy stores only a
// token's SHA-256 (`tokens { user: "ci" sha256: "..." }`), so the token itself never sits in a
// file the daemon's admins share. These are the pieces: hash a token as the CLI will send it,
// make a new random one into a private file, and write the policy line.
#ifndef GPUPROF_CLIENT_TOKEN_HASH_H_
#define GPUPROF_CLIENT_TOKEN_HASH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuprof::client {

// The SHA-256 of `data` as 64 lower-case hex digits (OpenSSL's libcrypto, as the daemon).
std::string Sha256Hex(absl::string_view data);

// The token in `contents` as the CLI sends it (`--token FILE`, $GPUPROF_TOKEN): surrounding
// whitespace dropped (a file's final newline). Refused, naming `source`, when nothing is left or
// when it holds a byte a gRPC header cannot carry (only printable ASCII, 0x20-0x7E, can).
absl::StatusOr<std::string> TokenAsSent(absl::string_view contents, absl::string_view source);

// `tokens { user: "NAME" sha256: "HEX" }`, the line to paste into the daemon's policy. The user
// must be a name the policy accepts: not empty, no whitespace, control characters, quotes,
// backslashes or parentheses.
absl::StatusOr<std::string> PolicyTokenLine(absl::string_view user, absl::string_view sha256_hex);

// A new token: 32 bytes from /dev/urandom (256 bits), base64url without padding (43
// characters of [A-Za-z0-9_-]).
absl::StatusOr<std::string> GenerateToken();

// Creates `path`, which must not exist yet, readable and writable by its owner only (0600),
// holding `token` and a newline. An existing file is never overwritten.
absl::Status WriteNewTokenFile(const std::string& path, absl::string_view token);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_TOKEN_HASH_H_
