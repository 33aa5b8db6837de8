#include "daemon/server/health_only_server.h"

#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpuprof::daemon {
namespace {

using grpc::health::v1::HealthCheckResponse;

// The names a client may ask about: the whole server ("") and the API it fronts.
bool KnownService(const std::string& name) {
  return name.empty() || name == "gpuprof.v1.Profiler";
}

}  // namespace

grpc::ServerUnaryReactor* HealthOnlyServer::Service::Check(
    grpc::CallbackServerContext* context, const grpc::health::v1::HealthCheckRequest* request,
    HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!KnownService(request->service())) {
    // What the health protocol prescribes for a service the server does not know.
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                                 absl::StrCat("unknown service \"", request->service(),
                                              "\"; this port knows \"\" and gpuprof.v1.Profiler")));
    return reactor;
  }
  response->set_status(serving.load() ? HealthCheckResponse::SERVING
                                      : HealthCheckResponse::NOT_SERVING);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

absl::StatusOr<std::unique_ptr<HealthOnlyServer>> HealthOnlyServer::Start(
    const std::string& address) {
  std::unique_ptr<HealthOnlyServer> health(new HealthOnlyServer());
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &health->port_);
  // A second daemon on the same port would answer for this one: refuse to share it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Probes send tiny messages; nothing else is accepted.
  builder.SetMaxReceiveMessageSize(4096);
  builder.RegisterService(&health->service_);
  health->server_ = builder.BuildAndStart();
  if (health->server_ == nullptr || health->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("--health_listen: could not listen on ", address));
  }
  return health;
}

HealthOnlyServer::~HealthOnlyServer() {
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
  }
}

void HealthOnlyServer::SetNotServing() { service_.serving.store(false); }

}  // namespace gpuprof::daemon
