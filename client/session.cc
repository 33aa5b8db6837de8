#include "client/session.h"

#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/terminal_text.h"

namespace gpuprof::client {

Session::Session(ClientEnvironment env, ConnectionOptions connection,
                 std::optional<std::string> explicit_user, std::optional<DaemonNode> node)
    : env_(std::move(env)),
      connection_(std::move(connection)),
      user_(explicit_user.value_or(env_.local_user)),
      explicit_user_(std::move(explicit_user)),
      node_(std::move(node)),
      stubs_(std::make_shared<DaemonStubs>()) {}

Session Session::WithOutput(std::ostream* out, std::ostream* err) const {
  Session copy = *this;
  copy.env_.out = out;
  copy.env_.err = err;
  copy.env_.stdout_is_terminal = false;
  return copy;
}

void Session::Connect() {
  *stubs_ = node_.has_value() && env_.connect_node ? env_.connect_node(*node_, connection_)
                                                   : env_.connect(connection_);
}

std::string StatusCodeName(grpc::StatusCode code) {
  static constexpr absl::string_view kNames[] = {"OK",
                                                 "CANCELLED",
                                                 "UNKNOWN",
                                                 "INVALID_ARGUMENT",
                                                 "DEADLINE_EXCEEDED",
                                                 "NOT_FOUND",
                                                 "ALREADY_EXISTS",
                                                 "PERMISSION_DENIED",
                                                 "RESOURCE_EXHAUSTED",
                                                 "FAILED_PRECONDITION",
                                                 "ABORTED",
                                                 "OUT_OF_RANGE",
                                                 "UNIMPLEMENTED",
                                                 "INTERNAL",
                                                 "UNAVAILABLE",
                                                 "DATA_LOSS",
                                                 "UNAUTHENTICATED"};
  const int index = static_cast<int>(code);
  if (index < 0 || index >= static_cast<int>(std::size(kNames))) {
    return absl::StrCat("CODE_", index);
  }
  return std::string(kNames[index]);
}

std::string StatusText(const grpc::Status& status) {
  return absl::StrCat(StatusCodeName(status.error_code()), ": ",
                      EscapeForTerminal(status.error_message()));
}

int ReportRpcError(std::ostream& err, const grpc::Status& status,
                   const ConnectionOptions& connection) {
  // Refusals echo what was asked (an id, a label), which may be someone else's text.
  const std::string message = EscapeForTerminal(status.error_message());
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE && connection.tls()) {
    err << "error: UNAVAILABLE: no TLS session with gpuprofd at " << connection.target << ": "
        << message
        << "\nif the daemon is running, it refused the handshake: check that --tls-ca is "
           "the CA that signed the daemon's certificate and that your --tls-cert is signed "
           "by the daemon's client CA, not expired and not revoked (the daemon requires a "
           "client certificate unless it accepts tokens)\n";
  } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    err << "error: UNAVAILABLE: cannot reach gpuprofd at " << connection.target << ": " << message
        << "; is it running? set --target or GPUPROF_TARGET\n";
  } else if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    err << "error: UNAUTHENTICATED: gpuprofd does not know who you are: " << message << "\n";
  } else {
    err << "error: " << StatusCodeName(status.error_code()) << ": " << message << "\n";
  }
  return ExitCodeForRpcStatus(status.error_code());
}

int ExitCodeForRpcStatus(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return kExitOk;
    // The request itself was wrong: fix the command line or the id.
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::UNIMPLEMENTED:
      return kExitUsage;
    case grpc::StatusCode::UNAVAILABLE:
      return kExitUnavailable;
    default:
      return kExitOtherError;
  }
}

int ReportUsageError(const ClientEnvironment& env, absl::string_view message,
                     absl::string_view help_command) {
  *env.err << "error: " << EscapeForTerminal(message) << "\n";
  if (!help_command.empty()) *env.err << "(see gpuprof " << help_command << " --help)\n";
  return kExitUsage;
}

}  // namespace gpuprof::client
