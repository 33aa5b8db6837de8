#include "client/node_channel.h"

#include <string>
#include <utility>
#include <vector>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_interceptor.h"

namespace gpuprof::client {
namespace {

// Adds the local user name to every call: a daemon trusts it only when it was started with
// --allow_insecure_tcp (it identifies everyone else itself).
class ClaimedUserInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit ClaimedUserInterceptor(std::string user) : user_(std::move(user)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"gpuprof-user", user_});
    }
    methods->Proceed();
  }

 private:
  std::string user_;
};

class ClaimedUserInterceptorFactory
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit ClaimedUserInterceptorFactory(std::string user) : user_(std::move(user)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new ClaimedUserInterceptor(user_);
  }

 private:
  std::string user_;
};

std::string ReadOrEmpty(const std::string& path) {
  if (path.empty()) return "";
  auto contents = ReadFileForFlag(path, "");
  return contents.ok() ? *contents : "";
}

std::shared_ptr<grpc::Channel> Channel(const std::string& target,
                                       const ConnectionOptions& options,
                                       const NodeTlsMaterial* node_tls, int max_receive_bytes) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(max_receive_bytes);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  bool tls = false;
  if (node_tls != nullptr) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = node_tls->ca_pem;
    ssl.pem_cert_chain = node_tls->cert_pem;
    ssl.pem_private_key = node_tls->key_pem;
    if (!node_tls->server_name.empty()) {
      arguments.SetSslTargetNameOverride(node_tls->server_name);
    }
    credentials = grpc::SslCredentials(ssl);
    tls = true;
  } else if (options.tls()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadOrEmpty(options.tls_ca);
    ssl.pem_cert_chain = ReadOrEmpty(options.tls_cert);
    ssl.pem_private_key = ReadOrEmpty(options.tls_key);
    credentials = grpc::SslCredentials(ssl);
    tls = true;
  }
  if (tls && !options.token.empty()) {
    // Call credentials only ever travel on a secure channel.
    credentials = grpc::CompositeChannelCredentials(
        credentials, grpc::AccessTokenCredentials(options.token));
  }
  if (options.claimed_user.empty()) {
    return grpc::CreateCustomChannel(target, credentials, arguments);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(std::make_unique<ClaimedUserInterceptorFactory>(options.claimed_user));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, credentials, arguments,
                                                                 std::move(interceptors));
}

}  // namespace

std::shared_ptr<grpc::Channel> DaemonChannel(const ConnectionOptions& options,
                                             int max_receive_bytes) {
  return Channel(options.target, options, nullptr, max_receive_bytes);
}

std::shared_ptr<grpc::Channel> NodeChannel(const DaemonNode& node,
                                           const ConnectionOptions& options,
                                           int max_receive_bytes) {
  return Channel(node.address, options, node.tls.has_value() ? &*node.tls : nullptr,
                 max_receive_bytes);
}

std::shared_ptr<grpc::Channel> NodeChannel(const DaemonNode& node, int max_receive_bytes) {
  return NodeChannel(node, ConnectionOptions(), max_receive_bytes);
}

}  // namespace gpuprof::client
