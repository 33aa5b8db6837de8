// gpuprofd's unix socket, owned by the daemon rather than by gRPC so that each connection's
// peer credentials (SO_PEERCRED: the connecting process's uid, from the kernel) are read at
// accept time, recorded for the connection, and the connection then handed to the gRPC server
// (grpc::AddInsecureChannelFromFd). gRPC 1.51 offers no other way to see a unix peer's uid.
#ifndef GPUPROF_DAEMON_UNIX_SOCKET_LISTENER_H_
#define GPUPROF_DAEMON_UNIX_SOCKET_LISTENER_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "daemon/server/caller_identity.h"
#include "daemon/server/connection_limit.h"
#include "grpcpp/server.h"

namespace gpuprof::daemon {

class UnixSocketListener {
 public:
  // Binds `path` (a stale socket file from a killed daemon is replaced; anything else there is
  // refused) and makes it connectable by every local user (0666: the kernel tells the daemon
  // who they are), or with `group` by that group's members only (0660). Every connection must
  // pass `limit` (null: no cap) before it is recorded and handed over.
  static absl::StatusOr<std::unique_ptr<UnixSocketListener>> Bind(
      const std::string& path, PeerCredentialRegistry* registry, ConnectionLimit* limit,
      std::optional<gid_t> group = std::nullopt);
  // Stops accepting and removes the socket file; connections already handed over stay.
  ~UnixSocketListener();
  UnixSocketListener(const UnixSocketListener&) = delete;
  UnixSocketListener& operator=(const UnixSocketListener&) = delete;

  // Accepts connections on a thread of its own and hands them to `server` (already started).
  void Serve(grpc::Server* server);
  int64_t accepted() const { return accepted_.load(); }

 private:
  UnixSocketListener(std::string path, int listen_fd, int wake_fd,
                     PeerCredentialRegistry* registry, ConnectionLimit* limit);
  void AcceptLoop(grpc::Server* server);

  const std::string path_;
  const int listen_fd_;
  const int wake_fd_;  // an eventfd that ends the accept loop
  PeerCredentialRegistry* const registry_;
  ConnectionLimit* const limit_;
  std::atomic<int64_t> accepted_{0};
  std::thread thread_;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_UNIX_SOCKET_LISTENER_H_
