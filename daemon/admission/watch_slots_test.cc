#include "daemon/admission/watch_slots.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon {
namespace {

using ::testing::HasSubstr;

WatchLimits DefaultLimits() {
  return WatchLimits{.per_subject = 64, .per_user_per_subject = 8, .per_user = 256};
}

TEST(WatchSlotsTest, OneUserCannotFillAnExperimentsSlots) {
  WatchSlots slots(DefaultLimits());
  const Watcher mallory{"mallory"};
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(slots.Acquire("experiment", "exp-1", "alice", mallory).ok()) << i;
  }
  const absl::StatusOr<int64_t> ninth = slots.Acquire("experiment", "exp-1", "alice", mallory);
  ASSERT_TRUE(absl::IsResourceExhausted(ninth.status())) << ninth.status();
  EXPECT_EQ(WatchSlots::RefusalReason(ninth.status()),
            "watch-cap:max_watchers_per_user_per_experiment");
  EXPECT_THAT(ninth.status().message(),
              HasSubstr("mallory already holds 8 live streams on experiment exp-1"));
  EXPECT_THAT(ninth.status().message(), HasSubstr("--max_watchers_per_user_per_experiment=8"));
  EXPECT_EQ(slots.LiveOn("exp-1"), 8);
  // The owner still gets every stream it may hold.
  for (int i = 0; i < 8; ++i) {
    EXPECT_TRUE(slots.Acquire("experiment", "exp-1", "alice", Watcher{"alice"}).ok()) << i;
  }
}

TEST(WatchSlotsTest, OthersTogetherLeaveTheOwnersRoom) {
  WatchSlots slots(DefaultLimits());
  ASSERT_EQ(slots.ReservedForOwner(), 8);
  // Seven other users take 8 each: 56, all that others may hold.
  for (int user = 0; user < 7; ++user) {
    for (int i = 0; i < 8; ++i) {
      ASSERT_TRUE(
          slots.Acquire("experiment", "exp-1", "alice", Watcher{absl::StrCat("u", user)}).ok());
    }
  }
  const absl::StatusOr<int64_t> eighth_user =
      slots.Acquire("experiment", "exp-1", "alice", Watcher{"u7"});
  ASSERT_TRUE(absl::IsResourceExhausted(eighth_user.status()));
  EXPECT_THAT(eighth_user.status().message(),
              HasSubstr("experiment exp-1 already has 56 live streams; users other than its "
                        "owner (alice) and admins may hold 56 (--max_watchers_per_experiment=64, "
                        "of which 8 are kept for the owner and admins)"));
  // The owner and an admin share the kept room, up to the cap itself.
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(slots.Acquire("experiment", "exp-1", "alice", Watcher{"alice"}).ok());
  }
  const Watcher root{"root", /*admin=*/true};
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(slots.Acquire("experiment", "exp-1", "alice", root).ok());
  }
  const absl::StatusOr<int64_t> full = slots.Acquire("experiment", "exp-1", "alice", root);
  ASSERT_TRUE(absl::IsResourceExhausted(full.status()));
  EXPECT_THAT(full.status().message(),
              HasSubstr("experiment exp-1 already has 64 live streams, the most gpuprofd allows "
                        "(--max_watchers_per_experiment=64)"));
  EXPECT_EQ(WatchSlots::RefusalReason(full.status()), "watch-cap:max_watchers_per_experiment");
  EXPECT_EQ(WatchSlots::RefusalReason(eighth_user.status()),
            "watch-cap:max_watchers_per_experiment");
  // Another experiment is untouched.
  EXPECT_TRUE(slots.Acquire("experiment", "exp-2", "bob", Watcher{"u7"}).ok());
}

TEST(WatchSlotsTest, PerUserCapSpansExperimentsAndSweeps) {
  WatchSlots slots(WatchLimits{.per_subject = 64, .per_user_per_subject = 8, .per_user = 10});
  const Watcher mallory{"mallory"};
  std::vector<int64_t> held;
  for (int i = 0; i < 5; ++i) {
    auto slot = slots.Acquire("experiment", absl::StrCat("exp-", i), "alice", mallory);
    ASSERT_TRUE(slot.ok());
    held.push_back(*slot);
    slot = slots.Acquire("sweep", absl::StrCat("swp-", i), "alice", mallory);
    ASSERT_TRUE(slot.ok());
    held.push_back(*slot);
  }
  const absl::StatusOr<int64_t> over = slots.Acquire("sweep", "swp-9", "alice", mallory);
  ASSERT_TRUE(absl::IsResourceExhausted(over.status()));
  EXPECT_THAT(over.status().message(),
              HasSubstr("mallory already holds 10 live watch streams over all experiments and "
                        "sweeps, the most one user may (--max_watch_streams_per_user=10)"));
  EXPECT_EQ(WatchSlots::RefusalReason(over.status()), "watch-cap:max_watch_streams_per_user");
  // Admins are not limited per user.
  const Watcher root{"root", /*admin=*/true};
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(slots.Acquire("experiment", absl::StrCat("exp-", i), "alice", root).ok());
  }
  // Releasing one makes room again; releasing twice changes nothing more.
  slots.Release(held.back());
  slots.Release(held.back());
  EXPECT_EQ(slots.LiveOf("mallory"), 9);
  EXPECT_TRUE(slots.Acquire("sweep", "swp-9", "alice", mallory).ok());
  EXPECT_FALSE(slots.Acquire("sweep", "swp-10", "alice", mallory).ok());
}

TEST(WatchSlotsTest, OwnSubmissionStreamIsAlwaysAdmittedAndCounted) {
  WatchSlots slots(WatchLimits{.per_subject = 2, .per_user_per_subject = 1, .per_user = 1});
  ASSERT_TRUE(slots.Acquire("experiment", "exp-1", "alice", Watcher{"alice"}).ok());
  EXPECT_FALSE(slots.Acquire("experiment", "exp-2", "alice", Watcher{"alice"}).ok());
  const absl::StatusOr<int64_t> acknowledgement = slots.Acquire(
      "experiment", "exp-2", "alice", Watcher{"alice", false, /*own_submission=*/true});
  ASSERT_TRUE(acknowledgement.ok()) << acknowledgement.status();
  EXPECT_EQ(slots.LiveOf("alice"), 2);
  slots.Release(*acknowledgement);
  EXPECT_EQ(slots.LiveOf("alice"), 1);
}

TEST(WatchSlotsTest, SmallCapKeepsHalfForTheOwner) {
  // --max_watchers_per_experiment=2: others may hold 1, the owner (or an admin) fills the cap.
  WatchSlots slots(WatchLimits{.per_subject = 2, .per_user_per_subject = 8, .per_user = 256});
  EXPECT_EQ(slots.ReservedForOwner(), 1);
  ASSERT_TRUE(slots.Acquire("experiment", "exp-1", "alice", Watcher{"mallory"}).ok());
  EXPECT_FALSE(slots.Acquire("experiment", "exp-1", "alice", Watcher{"eve"}).ok());
  ASSERT_TRUE(slots.Acquire("experiment", "exp-1", "alice", Watcher{"alice"}).ok());
  const absl::StatusOr<int64_t> third =
      slots.Acquire("experiment", "exp-1", "alice", Watcher{"root", /*admin=*/true});
  ASSERT_TRUE(absl::IsResourceExhausted(third.status()));
  EXPECT_THAT(third.status().message(), HasSubstr("--max_watchers_per_experiment=2"));
}

TEST(WatchSlotsTest, NoCapsMeansEveryStreamIsAdmitted) {
  WatchSlots slots(WatchLimits{});
  EXPECT_EQ(slots.ReservedForOwner(), 0);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(slots.Acquire("experiment", "exp-1", "alice", Watcher{"mallory"}).ok());
  }
  EXPECT_EQ(slots.LiveOn("exp-1"), 1000);
}

TEST(WatchSlotsTest, ParallelAcquiresNeverExceedTheCaps) {
  WatchSlots slots(WatchLimits{.per_subject = 64, .per_user_per_subject = 8, .per_user = 256});
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&slots, &admitted] {
      for (int i = 0; i < 50; ++i) {
        if (slots.Acquire("experiment", "exp-1", "alice", Watcher{"mallory"}).ok()) ++admitted;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(admitted.load(), 8);
  EXPECT_EQ(slots.LiveOn("exp-1"), 8);
}

}  // namespace
}  // namespace gpuprof::daemon
