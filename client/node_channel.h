// The gRPC channel to a daemon: plaintext, or TLS with the CLI's --tls-ca/--tls-cert/--tls-key
// (or config file) and the bearer token as call credentials. For a node of a fleet, the node's
// own CA, client certificate and key from the fleet file (and, when given, the name its
// certificate must carry) replace the TLS files. Every call carries the claimed user name.
#ifndef GPUPROF_CLIENT_NODE_CHANNEL_H_
#define GPUPROF_CLIENT_NODE_CHANNEL_H_

#include <memory>

#include "client/connection_options.h"
#include "client/fleet.h"
#include "grpcpp/channel.h"

namespace gpuprof::client {

// `options.target`, with `options`' TLS files and token.
std::shared_ptr<grpc::Channel> DaemonChannel(const ConnectionOptions& options,
                                             int max_receive_bytes);
// `node.address`, with the node's TLS material when it has some, else `options`' TLS files;
// the token and claimed user of `options` either way.
std::shared_ptr<grpc::Channel> NodeChannel(const DaemonNode& node,
                                           const ConnectionOptions& options,
                                           int max_receive_bytes);
// As above with no TLS files, token or claimed user of the CLI's own.
std::shared_ptr<grpc::Channel> NodeChannel(const DaemonNode& node, int max_receive_bytes);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_NODE_CHANNEL_H_
