// gpuprofd's TCP addresses, owned by the daemon rather than by gRPC so that every connection
// passes the connection cap (ConnectionLimit) before gRPC sees it. An admitted connection is
// handed to the gRPC server through an external connection acceptor, which runs the same TLS
// (or plaintext) handshake, with the same handshake timeout and channel settings, as a port
// gRPC listens on itself. A loopback connection's owner is read from the kernel as it is
// accepted (AcceptConnection) and recorded under the client's address, the peer name gRPC
// reports; remote clients are identified later by TLS.
#ifndef GPUPROF_DAEMON_TCP_SOCKET_LISTENER_H_
#define GPUPROF_DAEMON_TCP_SOCKET_LISTENER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/server/caller_identity.h"
#include "daemon/server/connection_limit.h"
#include "grpcpp/server_builder.h"

namespace gpuprof::daemon {

class TcpSocketListener {
 public:
  // Binds `address` ("host:port", "[v6]:port"; a host name binds each of its addresses).
  static absl::StatusOr<std::unique_ptr<TcpSocketListener>> Bind(
      const std::string& address, ConnectionLimit* limit, PeerCredentialRegistry* registry);
  // Stops accepting and closes the listening sockets; connections handed over stay.
  ~TcpSocketListener();
  TcpSocketListener(const TcpSocketListener&) = delete;
  TcpSocketListener& operator=(const TcpSocketListener&) = delete;

  // Accepts on a thread of its own and hands admitted connections to `acceptor`, which must
  // outlive this listener and belong to a server that is already started.
  void Serve(grpc::experimental::ExternalConnectionAcceptor* acceptor);

 private:
  TcpSocketListener(std::vector<int> listen_fds, int wake_fd, ConnectionLimit* limit,
                    PeerCredentialRegistry* registry);
  void AcceptLoop(grpc::experimental::ExternalConnectionAcceptor* acceptor);

  const std::vector<int> listen_fds_;
  const int wake_fd_;  // an eventfd that ends the accept loop
  ConnectionLimit* const limit_;
  PeerCredentialRegistry* const registry_;
  std::thread thread_;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_TCP_SOCKET_LISTENER_H_
