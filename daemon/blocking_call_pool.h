// Threads for the daemon's blocking calls, so that gRPC's callback threads never wait on them.
//
// gRPC runs callback-API handlers on a small executor (about two threads per core). A handler
// that waits there for a durable commit (an fsync, several milliseconds) holds one of those
// threads, and with all of them waiting, nothing else is served: List and Watch queue behind
// Submits, and the store's group commit never sees more than a handful of writes at once.
// Handlers hand their core call to this pool and return the reactor at once; the pool's thread
// finishes the RPC.
#ifndef GPUPROF_DAEMON_BLOCKING_CALL_POOL_H_
#define GPUPROF_DAEMON_BLOCKING_CALL_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gpuprof::daemon {

class BlockingCallPool {
 public:
  // Starts `threads` threads (at least one).
  explicit BlockingCallPool(int threads);
  // Runs every call already posted, then joins the threads.
  ~BlockingCallPool();
  BlockingCallPool(const BlockingCallPool&) = delete;
  BlockingCallPool& operator=(const BlockingCallPool&) = delete;

  // Runs `call` on one of the pool's threads, in posting order as threads free up.
  void Post(std::function<void()> call) ABSL_LOCKS_EXCLUDED(mutex_);

  int thread_count() const { return static_cast<int>(threads_.size()); }

 private:
  void RunCalls() ABSL_LOCKS_EXCLUDED(mutex_);

  absl::Mutex mutex_;
  absl::CondVar call_posted_;
  std::deque<std::function<void()>> calls_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_BLOCKING_CALL_POOL_H_
