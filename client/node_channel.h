// The gRPC channel to one daemon of a fleet: plaintext, or mutual TLS with the node's own CA,
// client certificate and key (from the fleet file) and, when given, the name its certificate
// must carry.
#ifndef GPUPROF_CLIENT_NODE_CHANNEL_H_
#define GPUPROF_CLIENT_NODE_CHANNEL_H_

#include <memory>

#include "client/fleet.h"
#include "grpcpp/channel.h"

namespace gpuprof::client {

std::shared_ptr<grpc::Channel> NodeChannel(const DaemonNode& node, int max_receive_bytes);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_NODE_CHANNEL_H_
