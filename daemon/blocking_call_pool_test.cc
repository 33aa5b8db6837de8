#include "daemon/blocking_call_pool.h"

#include <atomic>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon {
namespace {

TEST(BlockingCallPoolTest, BlockedCallsDoNotHoldUpTheOthers) {
  constexpr int kThreads = 4;
  BlockingCallPool pool(kThreads);
  // Three calls block until released; the fourth thread must still run every other call.
  absl::Notification release;
  absl::BlockingCounter blocked_started(kThreads - 1);
  for (int i = 0; i < kThreads - 1; ++i) {
    pool.Post([&] {
      blocked_started.DecrementCount();
      release.WaitForNotification();
    });
  }
  blocked_started.Wait();
  constexpr int kQuickCalls = 100;
  absl::BlockingCounter quick_done(kQuickCalls);
  for (int i = 0; i < kQuickCalls; ++i) pool.Post([&] { quick_done.DecrementCount(); });
  quick_done.Wait();
  release.Notify();
}

TEST(BlockingCallPoolTest, DestructionRunsEveryPostedCall) {
  std::atomic<int> ran = 0;
  {
    BlockingCallPool pool(2);
    for (int i = 0; i < 1000; ++i) pool.Post([&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 1000);
}

TEST(BlockingCallPoolTest, AtLeastOneThread) {
  BlockingCallPool pool(0);
  EXPECT_EQ(pool.thread_count(), 1);
  absl::Notification ran;
  pool.Post([&] { ran.Notify(); });
  ran.WaitForNotification();
}

}  // namespace
}  // namespace gpuprof::daemon
