#include "daemon/connection_limit.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace gpuprof::daemon {
namespace {

bool SameSocket(int fd, const std::pair<dev_t, ino_t>& identity) {
  struct stat now {};
  return fstat(fd, &now) == 0 && now.st_dev == identity.first && now.st_ino == identity.second;
}

}  // namespace

bool ConnectionLimit::Admit(int fd) {
  struct stat socket_stat {};
  if (fstat(fd, &socket_stat) != 0) return false;
  absl::MutexLock lock(&mutex_);
  // A stale entry under the same number is a closed connection: the new one replaces it.
  connections_.erase(fd);
  if (static_cast<int>(connections_.size()) >= max_connections_ &&
      absl::Now() - last_sweep_ >= kSweepInterval) {
    SweepClosed();
  }
  if (static_cast<int>(connections_.size()) >= max_connections_) {
    // Said once per run of refusals (the first, then every 1000th), not once per connection.
    if (refused_ % 1000 == 0) {
      std::fprintf(stderr,
                   "gpuprofd: %d connections open, the cap (--max_connections); refusing new "
                   "ones (%lld refused so far)\n",
                   max_connections_, static_cast<long long>(refused_ + 1));
    }
    ++refused_;
    return false;
  }
  connections_[fd] = {socket_stat.st_dev, socket_stat.st_ino};
  return true;
}

int ConnectionLimit::live() {
  absl::MutexLock lock(&mutex_);
  SweepClosed();
  return static_cast<int>(connections_.size());
}

int64_t ConnectionLimit::refused() const {
  absl::MutexLock lock(&mutex_);
  return refused_;
}

void ConnectionLimit::SweepClosed() {
  last_sweep_ = absl::Now();
  for (auto it = connections_.begin(); it != connections_.end();) {
    it = SameSocket(it->first, it->second) ? std::next(it) : connections_.erase(it);
  }
}

int AcceptAdmitted(int listen_fd, ConnectionLimit* limit, absl::string_view listener) {
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
  if (limit != nullptr && !limit->Admit(connection)) {
    close(connection);
    return -1;
  }
  return connection;
}

}  // namespace gpuprof::daemon
