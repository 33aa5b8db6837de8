// A gRPC server that serves grpc.health.v1 and nothing else, in plaintext: what Kubernetes'
// native gRPC probes (and load balancers) can reach when the API itself is behind mutual TLS.
// It tells whether gpuprofd serves; it exposes no experiment, GPU or user data.
#ifndef GPUPROF_DAEMON_HEALTH_ONLY_SERVER_H_
#define GPUPROF_DAEMON_HEALTH_ONLY_SERVER_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpuprof::daemon {

class HealthOnlyServer {
 public:
  // Listens on `address` ("0.0.0.0:7071"; port 0 picks one). Serving starts as SERVING.
  static absl::StatusOr<std::unique_ptr<HealthOnlyServer>> Start(const std::string& address);
  ~HealthOnlyServer();
  HealthOnlyServer(const HealthOnlyServer&) = delete;
  HealthOnlyServer& operator=(const HealthOnlyServer&) = delete;

  // NOT_SERVING from now on (the daemon is shutting down): readiness fails at once, before
  // the API stops answering.
  void SetNotServing();
  int port() const { return port_; }

 private:
  class Service final : public grpc::health::v1::Health::CallbackService {
   public:
    grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                    const grpc::health::v1::HealthCheckRequest* request,
                                    grpc::health::v1::HealthCheckResponse* response) override;
    std::atomic<bool> serving{true};
  };

  HealthOnlyServer() = default;

  Service service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_HEALTH_ONLY_SERVER_H_
