#include "daemon/server/accepted_connection.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace gpuprof::daemon {

AcceptedPeer DescribeAcceptedConnection(int fd, ListenerKind kind, const std::string& proc_root) {
  AcceptedPeer peer;
  if (kind == ListenerKind::kUnix) {
    // gRPC names a connection it was handed by descriptor "fd:N".
    peer.grpc_peer = absl::StrCat("fd:", fd);
    peer.owner.local = true;
    ucred credentials{};
    socklen_t length = sizeof(credentials);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0) {
      peer.uid = credentials.uid;
    }
  } else {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      peer.grpc_peer = GrpcPeerName(reinterpret_cast<const sockaddr*>(&address), length);
    }
    if (IsLoopbackPeer(peer.grpc_peer)) {
      if (auto uid = AcceptedLoopbackOwner(fd, proc_root); uid.ok()) peer.uid = *uid;
    }
  }
  if (peer.uid.has_value()) {
    peer.owner.key = absl::StrCat("uid:", *peer.uid);
    peer.owner.exempt = *peer.uid == geteuid();
  } else if (kind == ListenerKind::kTcp && !peer.grpc_peer.empty() &&
             !IsLoopbackPeer(peer.grpc_peer)) {
    // A remote client: its user is known only after TLS; its host is what it counts against.
    absl::string_view host = peer.grpc_peer;
    host = host.substr(0, host.rfind(':'));
    peer.owner.key = absl::StrCat("host:", host);
  } else {
    peer.owner.key = "unidentified";
  }
  return peer;
}

int AcceptConnection(int listen_fd, ListenerKind kind, ConnectionLimit* limit,
                     PeerCredentialRegistry* registry, absl::string_view listener) {
  const int connection = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (connection < 0) {
    if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
      std::fprintf(stderr, "gpuprofd: %s accept: %s\n", std::string(listener).c_str(),
                   strerror(errno));
      // Out of descriptors: wait a little rather than spin.
      if (errno == EMFILE || errno == ENFILE) poll(nullptr, 0, 100);
    }
    return -1;
  }
  const AcceptedPeer peer = DescribeAcceptedConnection(connection, kind);
  if (limit != nullptr && !limit->Admit(connection, peer.owner)) {
    close(connection);
    return -1;
  }
  if (registry != nullptr && !peer.grpc_peer.empty()) {
    registry->Record(peer.grpc_peer, peer.uid, connection);
  }
  return connection;
}

}  // namespace gpuprof::daemon
