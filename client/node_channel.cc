#include "client/node_channel.h"

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace gpuprof::client {

std::shared_ptr<grpc::Channel> NodeChannel(const DaemonNode& node, int max_receive_bytes) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(max_receive_bytes);
  if (!node.tls.has_value()) {
    return grpc::CreateCustomChannel(node.address, grpc::InsecureChannelCredentials(), arguments);
  }
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = node.tls->ca_pem;
  tls.pem_cert_chain = node.tls->cert_pem;
  tls.pem_private_key = node.tls->key_pem;
  if (!node.tls->server_name.empty()) arguments.SetSslTargetNameOverride(node.tls->server_name);
  return grpc::CreateCustomChannel(node.address, grpc::SslCredentials(tls), arguments);
}

}  // namespace gpuprof::client
