#include "daemon/server/tcp_socket_listener.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "daemon/server/accepted_connection.h"

namespace gpuprof::daemon {
namespace {

struct HostPort {
  std::string host;  // empty: every address
  std::string port;
};

absl::StatusOr<HostPort> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen: \"", address, "\" has no port (want host:port or [v6]:port)"));
  }
  HostPort parts{address.substr(0, colon), address.substr(colon + 1)};
  absl::string_view host = parts.host;
  if (absl::ConsumePrefix(&host, "[")) {
    if (!absl::ConsumeSuffix(&host, "]")) {
      return absl::InvalidArgumentError(
          absl::StrCat("--listen: \"", address, "\" has an unclosed [ in its host"));
    }
  }
  parts.host = std::string(host);
  if (parts.host == "*") parts.host.clear();
  return parts;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpSocketListener>> TcpSocketListener::Bind(
    const std::string& address, ConnectionLimit* limit, PeerCredentialRegistry* registry) {
  auto parts = SplitHostPort(address);
  if (!parts.ok()) return parts.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int error = getaddrinfo(parts->host.empty() ? nullptr : parts->host.c_str(),
                                    parts->port.c_str(), &hints, &found);
      error != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen: cannot resolve ", address, ": ", gai_strerror(error)));
  }
  bool has_ipv4 = false;
  for (addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
    has_ipv4 |= entry->ai_family == AF_INET;
  }
  std::vector<int> fds;
  std::string failure;
  for (addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
    const int fd = socket(entry->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      failure = strerror(errno);
      continue;
    }
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    // Beside an IPv4 address of the same name, the IPv6 socket must not claim IPv4 too.
    if (entry->ai_family == AF_INET6 && has_ipv4) {
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
    }
    if (bind(fd, entry->ai_addr, entry->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      failure = strerror(errno);
      close(fd);
      continue;
    }
    fds.push_back(fd);
  }
  freeaddrinfo(found);
  if (fds.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ": ", failure));
  }
  const int wake = eventfd(0, EFD_CLOEXEC);
  if (wake < 0) {
    for (const int fd : fds) close(fd);
    return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
  }
  return std::unique_ptr<TcpSocketListener>(new TcpSocketListener(std::move(fds), wake, limit, registry));
}

TcpSocketListener::TcpSocketListener(std::vector<int> listen_fds, int wake_fd,
                                     ConnectionLimit* limit, PeerCredentialRegistry* registry)
    : listen_fds_(std::move(listen_fds)), wake_fd_(wake_fd), limit_(limit), registry_(registry) {}

TcpSocketListener::~TcpSocketListener() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  for (const int fd : listen_fds_) close(fd);
  close(wake_fd_);
}

void TcpSocketListener::Serve(grpc::experimental::ExternalConnectionAcceptor* acceptor) {
  thread_ = std::thread([this, acceptor] { AcceptLoop(acceptor); });
}

void TcpSocketListener::AcceptLoop(grpc::experimental::ExternalConnectionAcceptor* acceptor) {
  std::vector<pollfd> fds;
  for (const int fd : listen_fds_) fds.push_back({fd, POLLIN, 0});
  fds.push_back({wake_fd_, POLLIN, 0});
  while (true) {
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "gpuprofd: TCP listener poll: %s\n", strerror(errno));
      return;
    }
    if (fds.back().revents != 0) return;
    for (size_t i = 0; i + 1 < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int connection =
          AcceptConnection(fds[i].fd, ListenerKind::kTcp, limit_, registry_, "TCP");
      if (connection < 0) continue;
      const int on = 1;
      setsockopt(connection, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
      grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters handoff;
      handoff.listener_fd = fds[i].fd;
      handoff.fd = connection;
      acceptor->HandleNewConnection(&handoff);
    }
  }
}

}  // namespace gpuprof::daemon
