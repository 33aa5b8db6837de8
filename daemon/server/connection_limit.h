// Caps on the client connections gpuprofd holds at once (gRPC 1.51 has no such setting), fair
// between the people sharing the box. The listeners accept connections themselves, learn from
// the kernel whom each belongs to (its owner: the local uid, or the remote address for a
// connection from another host), and ask Admit before handing it to gRPC:
//   - each owner holds at most max_per_owner connections (the daemon's own uid is exempt: it is
//     the box's operator); one more of theirs is refused, never someone else's evicted;
//   - TCP connections together leave reserved_local places for the unix socket;
//   - when every place is taken, the newcomer gets one by evicting the oldest connection of
//     the owner holding the most, if that owner holds more than the newcomer; otherwise (the
//     newcomer is the biggest holder) it is refused. A flood of one owner thus never locks
//     out another: the flooder loses its own connections first.
// A refused connection is closed at once, before gRPC spends anything on it; an evicted one is
// shut down, which gRPC sees as the client going away.
//
// gRPC gives no notice when it closes a connection it was handed, so a connection counts as
// live while its descriptor number still refers to the socket that was admitted (same inode).
// Closed ones are swept out when a cap is reached (at most every kSweepInterval, so that a
// flood of refused connections does not cost a sweep each), and when the count is read.
#ifndef GPUPROF_DAEMON_CONNECTION_LIMIT_H_
#define GPUPROF_DAEMON_CONNECTION_LIMIT_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gpuprof::daemon {

// Whom a connection counts against.
struct ConnectionOwner {
  std::string key;      // "uid:1000", "host:10.1.2.3", "unidentified"
  bool local = false;   // accepted on the unix socket
  bool exempt = false;  // the daemon's own uid: no per-owner cap
};

class ConnectionLimit {
 public:
  static constexpr absl::Duration kSweepInterval = absl::Milliseconds(20);

  struct Options {
    int max_connections = 1000;  // > 0
    int max_per_owner = 0;       // 0: no per-owner cap
    int reserved_local = 0;      // places TCP connections may not take
  };
  explicit ConnectionLimit(Options options);
  explicit ConnectionLimit(int max_connections) : ConnectionLimit(Options{max_connections}) {}
  ConnectionLimit(const ConnectionLimit&) = delete;
  ConnectionLimit& operator=(const ConnectionLimit&) = delete;

  // Counts the freshly accepted connection `fd` of `owner` and returns true (evicting another
  // owner's connection if that is what makes room), or returns false and counts a refusal; the
  // caller then closes it.
  bool Admit(int fd, const ConnectionOwner& owner = {});
  // Connections open now (sweeps out the closed ones first).
  int live();
  // Of `owner_key`, open now.
  int live_of(const std::string& owner_key);
  int64_t refused() const;
  int64_t evicted() const;
  int max_connections() const { return options_.max_connections; }

 private:
  struct Connection {
    dev_t device = 0;
    ino_t inode = 0;
    std::string owner;
    bool local = false;
    uint64_t order = 0;  // admission order: the lowest is the oldest
  };
  // Drops the connections whose descriptor no longer refers to the admitted socket.
  void SweepClosed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void SweepIfDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void Forget(std::map<int, Connection>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Makes one place among the connections `tcp_only` selects by evicting the biggest holder's
  // oldest one, if that holder is not `owner` and holds more than `owner`; false otherwise.
  bool EvictFromBiggestHolder(const std::string& owner, bool tcp_only)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  bool Refuse(absl::string_view why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const Options options_;
  mutable absl::Mutex mutex_;
  std::map<int, Connection> connections_ ABSL_GUARDED_BY(mutex_);  // by descriptor
  std::map<std::string, int> per_owner_ ABSL_GUARDED_BY(mutex_);
  int tcp_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t next_order_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t refused_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t evicted_ ABSL_GUARDED_BY(mutex_) = 0;
  absl::Time last_sweep_ ABSL_GUARDED_BY(mutex_) = absl::InfinitePast();
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_CONNECTION_LIMIT_H_
