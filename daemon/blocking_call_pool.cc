#include "daemon/blocking_call_pool.h"

#include <algorithm>
#include <utility>

namespace gpuprof::daemon {

BlockingCallPool::BlockingCallPool(int threads) {
  threads = std::max(1, threads);
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { RunCalls(); });
}

BlockingCallPool::~BlockingCallPool() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
    call_posted_.SignalAll();
  }
  for (std::thread& thread : threads_) thread.join();
}

void BlockingCallPool::Post(std::function<void()> call) {
  absl::MutexLock lock(&mutex_);
  calls_.push_back(std::move(call));
  call_posted_.Signal();
}

void BlockingCallPool::RunCalls() {
  while (true) {
    std::function<void()> call;
    {
      absl::MutexLock lock(&mutex_);
      // A CondVar, not Mutex::Await: Await evaluates its condition inside Debian's
      // uninstrumented abseil, where ThreadSanitizer cannot see the lock held around it.
      while (calls_.empty() && !stopping_) call_posted_.Wait(&mutex_);
      // Drained before stopping: every posted call finishes its RPC.
      if (calls_.empty()) return;
      call = std::move(calls_.front());
      calls_.pop_front();
    }
    call();
  }
}

}  // namespace gpuprof::daemon
