// How the CLI reaches gpuprofd: target, TLS files, bearer token, from flags, environment and
// ~/.config/gpuprof/config.textproto (flags win, then the environment, then the file), checked
// before any connection so that a missing, expired or mismatched file gets a clear error.
#ifndef GPUPROF_CLIENT_CONNECTION_OPTIONS_H_
#define GPUPROF_CLIENT_CONNECTION_OPTIONS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gpuprof/v1/access.pb.h"

namespace gpuprof::client {

struct ConnectionOptions {
  std::string target;
  // PEM file paths; tls_ca set means TLS.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  // The bearer token itself (read from --token FILE, $GPUPROF_TOKEN or the config's
  // token_file).
  std::string token;
  // Sent as gpuprof-user metadata: what a daemon running with --allow_insecure_tcp trusts.
  std::string claimed_user;

  bool tls() const { return !tls_ca.empty(); }
};

// $GPUPROF_CONFIG, else $XDG_CONFIG_HOME/gpuprof/config.textproto, else
// ~/.config/gpuprof/config.textproto.
std::string DefaultClientConfigPath();
// An absent file is an empty config; one that does not parse is an error naming the line.
absl::StatusOr<v1::ClientConfig> LoadClientConfig(const std::string& path);

// Files readable, the client certificate within its validity at `now` and matching its key,
// the token only with TLS. Errors name the flag and the file.
absl::Status CheckConnectionOptions(const ConnectionOptions& options, absl::Time now);

// The claimed user (gpuprof-user) and the bearer token (authorization) travel in gRPC headers,
// which carry printable ASCII only (0x20-0x7E): gRPC aborts the process on anything else, so
// they are checked before any connection. INVALID_ARGUMENT naming `source` (--user, $USER,
// --token FILE, ...), the first byte that cannot travel and its offset; the value itself is
// shown only when `show_value` (never for a token).
absl::Status CheckHeaderValue(absl::string_view source, absl::string_view value, bool show_value);

// The file's contents; errors name `flag` and the path.
absl::StatusOr<std::string> ReadFileForFlag(const std::string& path, const std::string& flag);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_CONNECTION_OPTIONS_H_
