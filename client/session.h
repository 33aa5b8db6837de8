// What every gpuprof command shares: its environment (streams, terminal, clock, how to
// connect), the exit codes, how RPC and usage errors are reported, and Session, the one
// connection to one daemon through which every unary call goes (context, deadline, call,
// error, --json).
#ifndef GPUPROF_CLIENT_SESSION_H_
#define GPUPROF_CLIENT_SESSION_H_

#include <functional>
#include <istream>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/connection_options.h"
#include "client/fleet.h"
#include "client/render.h"
#include "client/request_text.h"
#include "gpuprof/v1/profiler.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
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
  // compare --fail-on-regression PCT: B is worse than A beyond PCT.
  kExitRegression = 5,
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
  std::function<DaemonStubs(const DaemonNode& node, const ConnectionOptions& options)> connect_node;
  // $GPUPROF_FLEET (a fleet file) and $HOME (for ~/.config/gpuprof/fleet.textproto).
  std::string fleet_from_env;
  std::string home_dir;
};

// The ExitCode for an RPC that failed with `code`.
int ExitCodeForRpcStatus(grpc::StatusCode code);

// "INVALID_ARGUMENT", "UNAVAILABLE", ...
std::string StatusCodeName(grpc::StatusCode code);

// "NOT_FOUND: message", the message escaped for the terminal.
std::string StatusText(const grpc::Status& status);

// Writes why an RPC to the daemon at `connection.target` failed, with what to check (the TLS
// files, --target, who the daemon thinks you are), and returns the exit code for it.
int ReportRpcError(std::ostream& err, const grpc::Status& status,
                   const ConnectionOptions& connection);

// Writes "error: MESSAGE" (escaped) and, unless `help_command` is empty, where its help is;
// returns kExitUsage.
int ReportUsageError(const ClientEnvironment& env, absl::string_view message,
                     absl::string_view help_command);

// A unary method of a stub: &v1::Profiler::StubInterface::GetSweep.
template <typename Stub, typename Request, typename Response>
using UnaryRpc = grpc::Status (Stub::*)(grpc::ClientContext*, const Request&, Response*);

// Talks to one daemon for one command: connects on first use; copies share the connection.
class Session {
 public:
  // `node`: a node of a fleet, whose own TLS material (from the fleet file), when it has any,
  // replaces the connection's TLS files.
  Session(ClientEnvironment env, ConnectionOptions connection,
          std::optional<std::string> explicit_user, std::optional<DaemonNode> node = std::nullopt);

  std::ostream& out() const { return *env_.out; }
  std::ostream& err() const { return *env_.err; }
  const ClientEnvironment& env() const { return env_; }
  const ConnectionOptions& connection() const { return connection_; }
  const std::string& user() const { return user_; }
  // --user, when given: the daemon honours it for admins only.
  const std::optional<std::string>& explicit_user() const { return explicit_user_; }
  absl::Time now() const { return env_.now ? env_.now() : absl::Now(); }

  v1::Profiler::StubInterface& profiler() { return StubOf<v1::Profiler::StubInterface>(); }
  grpc::health::v1::Health::StubInterface& health() {
    return StubOf<grpc::health::v1::Health::StubInterface>();
  }

  // The same connection, its output kept in `out` and `err` (not a terminal).
  Session WithOutput(std::ostream* out, std::ostream* err) const;

  int ReportRpcError(const grpc::Status& status) const {
    return client::ReportRpcError(err(), status, connection_);
  }

  // One unary call; unary calls must not hang on a stuck daemon, so each gets `deadline`
  // (default: the environment's unary deadline).
  template <typename Stub, typename Request, typename Response>
  grpc::Status Call(UnaryRpc<Stub, Request, Response> rpc,
                    const std::type_identity_t<Request>& request, Response& response,
                    std::optional<absl::Duration> deadline = std::nullopt) {
    // Text that is not UTF-8 would reach the daemon as a request it cannot parse.
    if (const absl::Status text = CheckRequestIsUtf8(request); !text.ok()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(text.message()));
    }
    grpc::ClientContext context;
    context.set_deadline(
        absl::ToChronoTime(absl::Now() + deadline.value_or(env_.unary_rpc_deadline)));
    return (StubOf<Stub>().*rpc)(&context, request, &response);
  }

  // Call, then kExitOk, or the exit code after reporting the error.
  template <typename Stub, typename Request, typename Response>
  int CallOrReport(UnaryRpc<Stub, Request, Response> rpc,
                   const std::type_identity_t<Request>& request, Response& response,
                   std::optional<absl::Duration> deadline = std::nullopt) {
    const grpc::Status status = Call(rpc, request, response, deadline);
    return status.ok() ? kExitOk : ReportRpcError(status);
  }

  // The shape of most commands: call, then print the response as one line of JSON with
  // `json`, else let `render` print it and say the exit code.
  template <typename Stub, typename Request, typename Response, typename Render>
  int CallAndPrint(UnaryRpc<Stub, Request, Response> rpc,
                   const std::type_identity_t<Request>& request, bool json, Render render) {
    Response response;
    if (const int code = CallOrReport(rpc, request, response); code != kExitOk) return code;
    if (!json) return render(response);
    out() << JsonLine(response) << "\n";
    return kExitOk;
  }

 private:
  template <typename Stub>
  Stub& StubOf() {
    if (stubs_->profiler == nullptr) Connect();
    if constexpr (std::is_same_v<Stub, grpc::health::v1::Health::StubInterface>) {
      return *stubs_->health;
    } else {
      return *stubs_->profiler;
    }
  }
  void Connect();

  ClientEnvironment env_;
  ConnectionOptions connection_;
  std::string user_;
  std::optional<std::string> explicit_user_;
  std::optional<DaemonNode> node_;
  // Made on first use, shared with copies (WithOutput).
  std::shared_ptr<DaemonStubs> stubs_;
};

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_SESSION_H_
