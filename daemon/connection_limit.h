// A cap on the client connections gpuprofd holds at once, over all its listeners (gRPC 1.51 has
// no such setting). The listeners accept connections themselves and ask Admit before handing
// one to gRPC; a connection over the cap is closed at once, before gRPC spends anything on it.
//
// gRPC gives no notice when it closes a connection it was handed, so a connection counts as
// live while its descriptor number still refers to the socket that was admitted (same inode).
// Closed ones are swept out when the count reaches the cap (at most every kSweepInterval, so
// that a flood of refused connections does not cost a sweep each), and when the count is read:
// a descriptor number reused by something else (another connection, a file) no longer matches.
#ifndef GPUPROF_DAEMON_CONNECTION_LIMIT_H_
#define GPUPROF_DAEMON_CONNECTION_LIMIT_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gpuprof::daemon {

class ConnectionLimit {
 public:
  static constexpr absl::Duration kSweepInterval = absl::Milliseconds(20);

  // `max_connections` > 0.
  explicit ConnectionLimit(int max_connections) : max_connections_(max_connections) {}
  ConnectionLimit(const ConnectionLimit&) = delete;
  ConnectionLimit& operator=(const ConnectionLimit&) = delete;

  // Counts the freshly accepted connection `fd` and returns true, or returns false (and counts
  // a refusal) when the cap is reached; the caller then closes it.
  bool Admit(int fd);
  // Connections open now (sweeps out the closed ones first).
  int live();
  int64_t refused() const;
  int max_connections() const { return max_connections_; }

 private:
  // Drops the connections whose descriptor no longer refers to the admitted socket.
  void SweepClosed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const int max_connections_;
  mutable absl::Mutex mutex_;
  // Descriptor -> (device, inode) of the admitted socket.
  std::map<int, std::pair<dev_t, ino_t>> connections_ ABSL_GUARDED_BY(mutex_);
  int64_t refused_ ABSL_GUARDED_BY(mutex_) = 0;
  absl::Time last_sweep_ ABSL_GUARDED_BY(mutex_) = absl::InfinitePast();
};

// Accepts one connection from the non-blocking `listen_fd` (close-on-exec, non-blocking) and
// admits it under `limit` (null: no cap). Returns its descriptor, or -1 when there was none to
// take or it was over the cap (then it is closed). Errors other than "try again" are printed
// naming `listener`; out of descriptors, it waits 100 ms so that the caller does not spin.
int AcceptAdmitted(int listen_fd, ConnectionLimit* limit, absl::string_view listener);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_CONNECTION_LIMIT_H_
