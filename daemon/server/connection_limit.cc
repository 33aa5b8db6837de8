#include "daemon/server/connection_limit.h"

#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdio>
#include <string>

namespace gpuprof::daemon {
namespace {

bool SameSocket(int fd, dev_t device, ino_t inode) {
  struct stat now {};
  return fstat(fd, &now) == 0 && now.st_dev == device && now.st_ino == inode;
}

}  // namespace

ConnectionLimit::ConnectionLimit(Options options) : options_(options) {}

bool ConnectionLimit::Admit(int fd, const ConnectionOwner& owner) {
  struct stat socket_stat {};
  if (fstat(fd, &socket_stat) != 0) return false;
  absl::MutexLock lock(&mutex_);
  // A stale entry under the same number is a closed connection: the new one replaces it.
  if (const auto stale = connections_.find(fd); stale != connections_.end()) Forget(stale);

  if (options_.max_per_owner > 0 && !owner.exempt &&
      per_owner_[owner.key] >= options_.max_per_owner) {
    SweepIfDue();
    if (per_owner_[owner.key] >= options_.max_per_owner) {
      return Refuse("its owner's cap (--max_connections_per_user)");
    }
  }
  const int tcp_places = options_.max_connections - options_.reserved_local;
  if (!owner.local && tcp_ >= tcp_places) {
    SweepIfDue();
    if (tcp_ >= tcp_places && !EvictFromBiggestHolder(owner.key, /*tcp_only=*/true)) {
      return Refuse("the TCP share of the cap (--max_connections less "
                    "--reserved_local_connections)");
    }
  }
  if (static_cast<int>(connections_.size()) >= options_.max_connections) {
    SweepIfDue();
    if (static_cast<int>(connections_.size()) >= options_.max_connections &&
        !EvictFromBiggestHolder(owner.key, /*tcp_only=*/false)) {
      return Refuse("the cap (--max_connections)");
    }
  }
  connections_[fd] = Connection{socket_stat.st_dev, socket_stat.st_ino, owner.key, owner.local,
                                next_order_++};
  ++per_owner_[owner.key];
  if (!owner.local) ++tcp_;
  return true;
}

bool ConnectionLimit::Refuse(absl::string_view why) {
  // Said once per run of refusals (the first, then every 1000th), not once per connection.
  if (refused_ % 1000 == 0) {
    std::fprintf(stderr,
                 "gpuprofd: %d connections open; a new one over %s: refusing new ones of the "
                 "biggest holders (%lld refused so far)\n",
                 static_cast<int>(connections_.size()), std::string(why).c_str(),
                 static_cast<long long>(refused_ + 1));
  }
  ++refused_;
  return false;
}

bool ConnectionLimit::EvictFromBiggestHolder(const std::string& owner, bool tcp_only) {
  std::map<std::string, int> held;
  for (const auto& [fd, connection] : connections_) {
    if (!tcp_only || !connection.local) ++held[connection.owner];
  }
  std::string biggest;
  int most = 0;
  for (const auto& [key, count] : held) {
    if (count > most) {
      biggest = key;
      most = count;
    }
  }
  // One more than the newcomer is a tie after the swap: refuse rather than trade places.
  const int newcomer = held.count(owner) == 0 ? 0 : held[owner];
  if (most == 0 || biggest == owner || most <= newcomer + 1) return false;
  auto oldest = connections_.end();
  for (auto it = connections_.begin(); it != connections_.end(); ++it) {
    if (it->second.owner != biggest || (tcp_only && it->second.local)) continue;
    if (oldest == connections_.end() || it->second.order < oldest->second.order) oldest = it;
  }
  if (oldest == connections_.end()) return false;
  // Only while the number still names the admitted socket: a descriptor gRPC has closed may
  // already be something else of the daemon's.
  if (SameSocket(oldest->first, oldest->second.device, oldest->second.inode)) {
    shutdown(oldest->first, SHUT_RDWR);
    ++evicted_;
    if (evicted_ % 1000 == 1) {
      std::fprintf(stderr,
                   "gpuprofd: connection cap reached; evicting the oldest connections of %s, "
                   "which holds the most (%d) (%lld evicted so far)\n",
                   biggest.c_str(), most, static_cast<long long>(evicted_));
    }
  }
  Forget(oldest);
  return true;
}

void ConnectionLimit::Forget(std::map<int, Connection>::iterator it) {
  if (--per_owner_[it->second.owner] <= 0) per_owner_.erase(it->second.owner);
  if (!it->second.local) --tcp_;
  connections_.erase(it);
}

int ConnectionLimit::live() {
  absl::MutexLock lock(&mutex_);
  SweepClosed();
  return static_cast<int>(connections_.size());
}

int ConnectionLimit::live_of(const std::string& owner_key) {
  absl::MutexLock lock(&mutex_);
  SweepClosed();
  const auto it = per_owner_.find(owner_key);
  return it == per_owner_.end() ? 0 : it->second;
}

int64_t ConnectionLimit::refused() const {
  absl::MutexLock lock(&mutex_);
  return refused_;
}

int64_t ConnectionLimit::evicted() const {
  absl::MutexLock lock(&mutex_);
  return evicted_;
}

void ConnectionLimit::SweepIfDue() {
  if (absl::Now() - last_sweep_ >= kSweepInterval) SweepClosed();
}

void ConnectionLimit::SweepClosed() {
  last_sweep_ = absl::Now();
  for (auto it = connections_.begin(); it != connections_.end();) {
    const auto next = std::next(it);
    if (!SameSocket(it->first, it->second.device, it->second.inode)) Forget(it);
    it = next;
  }
}

}  // namespace gpuprof::daemon
