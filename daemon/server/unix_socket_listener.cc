#include "daemon/server/unix_socket_listener.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/server/accepted_connection.h"
#include "grpcpp/server_posix.h"

namespace gpuprof::daemon {

absl::StatusOr<std::unique_ptr<UnixSocketListener>> UnixSocketListener::Bind(
    const std::string& path, PeerCredentialRegistry* registry, ConnectionLimit* limit,
    std::optional<gid_t> group) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("unix socket path ", path, " is longer than ",
                                                   sizeof(address.sun_path) - 1, " bytes"));
  }
  memcpy(address.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  // Only a socket is replaced: a mistyped path must not delete someone's file.
  struct stat existing {};
  if (lstat(path.c_str(), &existing) == 0 && !S_ISSOCK(existing.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "unix socket path ", path, " exists and is not a socket; not replacing it"));
  }
  unlink(path.c_str());
  // The daemon's umask (077) makes the socket private from bind until the chmod below.
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      (group.has_value() && chown(path.c_str(), static_cast<uid_t>(-1), *group) != 0) ||
      chmod(path.c_str(), group.has_value() ? 0660 : 0666) != 0 ||
      // SOMAXCONN (the kernel caps it at net.core.somaxconn): with a short backlog, a burst
      // of clients connecting at once (200 in the load test) had some refused outright.
      listen(fd, SOMAXCONN) != 0) {
    const int error = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on unix:", path, ": ",
                                               strerror(error)));
  }
  const int wake = eventfd(0, EFD_CLOEXEC);
  if (wake < 0) {
    close(fd);
    return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
  }
  return std::unique_ptr<UnixSocketListener>(new UnixSocketListener(path, fd, wake, registry, limit));
}

UnixSocketListener::UnixSocketListener(std::string path, int listen_fd, int wake_fd,
                                       PeerCredentialRegistry* registry, ConnectionLimit* limit)
    : path_(std::move(path)),
      listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      registry_(registry),
      limit_(limit) {}

UnixSocketListener::~UnixSocketListener() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_fd_);
  unlink(path_.c_str());
}

void UnixSocketListener::Serve(grpc::Server* server) {
  thread_ = std::thread([this, server] { AcceptLoop(server); });
}

void UnixSocketListener::AcceptLoop(grpc::Server* server) {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "gpuprofd: unix socket poll: %s\n", strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    // Peer credentials read and recorded before gRPC can run a call on the connection.
    const int connection =
        AcceptConnection(listen_fd_, ListenerKind::kUnix, limit_, registry_, "unix socket");
    if (connection < 0) continue;
    ++accepted_;
    grpc::AddInsecureChannelFromFd(server, connection);
  }
}

}  // namespace gpuprof::daemon
