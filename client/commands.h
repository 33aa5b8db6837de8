// The gpuprof subcommands, run against Profiler and Health stubs so that tests can serve them
// in process. main.cc only fills a ClientEnvironment and calls RunGpuprof.
#ifndef GPUPROF_CLIENT_COMMANDS_H_
#define GPUPROF_CLIENT_COMMANDS_H_

#include <functional>
#include <istream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/connection_options.h"
#include "client/fleet.h"
#include "gpuprof/v1/profiler.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/support/status.h"

namespace gpuprof::client {
inline constexpr char kDefaultTarget[] = "127.0.0.1:7070";
// Results with traces and many operations can be large; gRPC's default limit is 4 MiB.
inline constexpr int kMaxReceiveMessageBytes = 64 << 20;

// What `gpuprof` exits with.
enum ExitCode : int {
  kExitOk = 0,
  // submit --follow / watch: the experiment ended but did not finish (failed, cancelled, timed
  // out, interrupted) or the stream ended first; health: the daemon is not serving.
  kExitNotFinished = 1,
  // Bad command line, or the daemon rejected the request (INVALID_ARGUMENT, NOT_FOUND,
  // FAILED_PRECONDITION, ...).
  kExitUsage = 2,
  // The daemon cannot be reached (UNAVAILABLE).
  kExitUnavailable = 3,
  // Any other error (INTERNAL, DEADLINE_EXCEEDED, ...).
  kExitOtherError = 4,
  // Across a fleet: some nodes did not answer in time or failed; the output covers the others
  // and names the missing ones.
  kExitPartial = 6,
};

struct DaemonStubs {
  std::unique_ptr<v1::Profiler::StubInterface> profiler;
  std::unique_ptr<grpc::health::v1::Health::StubInterface> health;
};

// Everything a command needs from outside: streams, terminal, defaults, clock, connection.
struct ClientEnvironment {
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  // stdin, for commands that read from it (token-hash); may be null.
  std::istream* in = nullptr;
  bool stdout_is_terminal = false;
  int terminal_width = 0;
  // $GPUPROF_TARGET; empty when unset.
  std::string target_from_env;
  // $GPUPROF_TOKEN; empty when unset.
  std::string token_from_env;
  // The CLI's config file (ClientConfig textproto); empty: none is read.
  std::string config_path;
  // $USER, else the password database's name for the uid.
  std::string local_user;
  absl::TimeZone time_zone = absl::UTCTimeZone();
  std::function<absl::Time()> now;
  // Every unary RPC gets this deadline; streams get none (experiments can run for hours).
  absl::Duration unary_rpc_deadline = absl::Seconds(30);
  // Opens stubs for a gRPC target (options already checked); called only by commands that
  // talk to the daemon.
  std::function<DaemonStubs(const ConnectionOptions& options)> connect;
  // Opens stubs for a node of a fleet: `options` (its target is the node's address) with the
  // node's own TLS material from the fleet file, when it has any, in place of the TLS files.
  // When unset, `connect` is called with `options`.
  std::function<DaemonStubs(const DaemonNode& node, const ConnectionOptions& options)>
      connect_node;
  // $GPUPROF_FLEET (a fleet file) and $HOME (for ~/.config/gpuprof/fleet.textproto).
  std::string fleet_from_env;
  std::string home_dir;
};

// Runs `gpuprof args...` (args without the program name) and returns the exit code.
int RunGpuprof(const std::vector<std::string>& args, const ClientEnvironment& env);

// The ExitCode for an RPC that failed with `code`.
int ExitCodeForRpcStatus(grpc::StatusCode code);

// "INVALID_ARGUMENT", "UNAVAILABLE", ...
std::string StatusCodeName(grpc::StatusCode code);

// Writes why an RPC to the daemon at `connection.target` failed, with what to check (the TLS
// files, --target, who the daemon thinks you are), and returns the exit code for it.
int ReportRpcError(std::ostream& err, const grpc::Status& status,
                   const ConnectionOptions& connection);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_COMMANDS_H_
