#include "daemon/scheduling/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprof::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

// Four GPUs, NVLink pairs (0,1) and (2,3), one NUMA node.
GpuTopology FourGpus() {
  v1::ListGpusResponse inventory;
  for (int i = 0; i < 4; ++i) inventory.add_gpus()->set_index(i);
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      auto* link = inventory.add_links();
      link->set_gpu_a(a);
      link->set_gpu_b(b);
      link->set_type(a / 2 == b / 2 ? v1::LINK_TYPE_NVLINK : v1::LINK_TYPE_PCIE_SWITCH);
    }
  }
  return GpuTopology(inventory);
}

PendingExperiment Cpu(const std::string& id, const std::string& user, int64_t order,
                      int priority = 0) {
  return PendingExperiment{id, user, priority, order, {}, 0};
}

PendingExperiment Gpus(const std::string& id, const std::string& user, int64_t order, int count) {
  PendingExperiment experiment{id, user, 0, order, {}, count};
  experiment.selection.set_gpu_count(count);
  return experiment;
}

std::vector<std::string> Ids(const std::vector<Dispatch>& dispatched) {
  std::vector<std::string> ids;
  for (const auto& d : dispatched) ids.push_back(d.id);
  return ids;
}

TEST(Scheduler, OneUsersBacklogDoesNotHoldBackAnother) {
  Scheduler scheduler(FourGpus(), /*cpu_slots=*/1);
  for (int i = 0; i < 100; ++i) scheduler.Enqueue(Cpu("a" + std::to_string(i), "alice", i));
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre("a0"));
  scheduler.Enqueue(Cpu("b0", "bob", 100));
  EXPECT_EQ(scheduler.QueuePosition("b0"), 1);
  scheduler.Release("a0");
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre("b0"));
  scheduler.Release("b0");
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre("a1"));
}

TEST(Scheduler, AHeldDispatchLetsAnEarlierOrderQueuedLaterGoFirst) {
  Scheduler scheduler(FourGpus(), /*cpu_slots=*/1);
  scheduler.HoldDispatchUntil(kNow + absl::Seconds(10));
  scheduler.Enqueue(Cpu("later", "alice", 20));
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre());
  // Queued after it, but with the earlier place it kept: it runs first once the hold ends.
  scheduler.Enqueue(Cpu("rerun", "alice", 10));
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow + absl::Seconds(10))), ElementsAre("rerun"));
}

TEST(Scheduler, SweepGroupNeverHoldsMoreGpusThanItsCap) {
  Scheduler scheduler(FourGpus(), 1);
  for (int i = 0; i < 6; ++i) {
    PendingExperiment point = Gpus("p" + std::to_string(i), "alice", i, 1);
    point.group = "swp-000001";
    point.group_max_gpus = 2;
    scheduler.Enqueue(point);
  }
  // Four GPUs are free, but the sweep may hold two.
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre("p0", "p1"));
  // Another user's experiment takes a free GPU: the cap does not reserve anything.
  scheduler.Enqueue(Gpus("b0", "bob", 10, 1));
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre("b0"));
  scheduler.Release("p0");
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre("p2"));
  EXPECT_THAT(scheduler.DispatchReady(kNow), IsEmpty());
  // Long waits do not make a capped point reserve GPUs for itself.
  EXPECT_THAT(scheduler.DispatchReady(kNow + absl::Hours(1)), IsEmpty());
  scheduler.Enqueue(Gpus("b1", "bob", 11, 1));
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow + absl::Hours(1))), ElementsAre("b1"));
}

TEST(Scheduler, UsersTakeTurns) {
  Scheduler scheduler(FourGpus(), 1);
  int64_t order = 0;
  for (int i = 0; i < 3; ++i) scheduler.Enqueue(Cpu("a" + std::to_string(i), "alice", order++));
  for (int i = 0; i < 3; ++i) scheduler.Enqueue(Cpu("b" + std::to_string(i), "bob", order++));
  std::vector<std::string> ran;
  for (int i = 0; i < 6; ++i) {
    auto dispatched = scheduler.DispatchReady(kNow);
    ASSERT_EQ(dispatched.size(), 1u);
    ran.push_back(dispatched[0].id);
    scheduler.Release(dispatched[0].id);
  }
  EXPECT_THAT(ran, ElementsAre("a0", "b0", "a1", "b1", "a2", "b2"));
}

TEST(Scheduler, PriorityBeatsFairShare) {
  Scheduler scheduler(FourGpus(), 1);
  scheduler.Enqueue(Cpu("low", "bob", 0, /*priority=*/0));
  scheduler.Enqueue(Cpu("high", "alice", 1, /*priority=*/5));
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre("high"));
  EXPECT_EQ(scheduler.QueuePosition("low"), 1);
}

TEST(Scheduler, GpuLeasesAreExclusiveAndTopologyAware) {
  Scheduler scheduler(FourGpus(), 1);
  scheduler.Enqueue(Gpus("pair1", "alice", 0, 2));
  scheduler.Enqueue(Gpus("pair2", "bob", 1, 2));
  scheduler.Enqueue(Gpus("single", "carol", 2, 1));
  const auto dispatched = scheduler.DispatchReady(kNow);
  ASSERT_EQ(dispatched.size(), 2u);
  EXPECT_EQ(dispatched[0].id, "pair1");
  EXPECT_THAT(dispatched[0].gpus, ElementsAre(0, 1));
  EXPECT_EQ(dispatched[1].id, "pair2");
  EXPECT_THAT(dispatched[1].gpus, ElementsAre(2, 3));
  EXPECT_EQ(scheduler.GpuLeases().size(), 4u);
  EXPECT_THAT(scheduler.DispatchReady(kNow), IsEmpty());
  scheduler.Release("pair2");
  const auto next = scheduler.DispatchReady(kNow);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].id, "single");
  EXPECT_THAT(next[0].gpus, ElementsAre(2));
}

TEST(Scheduler, BusyGpusDoNotBlockExperimentsThatFitElsewhere) {
  Scheduler scheduler(FourGpus(), 1);
  scheduler.Enqueue(Gpus("three", "alice", 0, 3));
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre("three"));
  scheduler.Enqueue(Gpus("two", "bob", 1, 2));
  scheduler.Enqueue(Gpus("one", "carol", 2, 1));
  scheduler.Enqueue(Cpu("cpu", "dave", 3));
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre("one", "cpu"));
  EXPECT_EQ(scheduler.QueuePosition("two"), 1);
}

TEST(Scheduler, LongWaitingLargeRequestReservesTheGpusThatFreeUp) {
  Scheduler scheduler(FourGpus(), 1, /*reserve_after=*/absl::Minutes(2));
  scheduler.Enqueue(Gpus("three", "alice", 0, 3));
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre("three"));
  scheduler.Enqueue(Gpus("four", "bob", 1, 4));
  scheduler.Enqueue(Gpus("small1", "carol", 2, 1));
  // Before the limit, small work fills the free GPU.
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre("small1"));
  scheduler.Release("small1");
  scheduler.Enqueue(Gpus("small2", "carol", 3, 1));
  scheduler.Enqueue(Cpu("cpu", "dave", 4));
  // Past the limit, the freed GPU is kept for the waiting four-GPU request; CPU work still runs.
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow + absl::Minutes(3))), ElementsAre("cpu"));
  scheduler.Release("three");
  const auto dispatched = scheduler.DispatchReady(kNow + absl::Minutes(4));
  ASSERT_EQ(dispatched.size(), 1u);
  EXPECT_EQ(dispatched[0].id, "four");
  EXPECT_THAT(dispatched[0].gpus, ElementsAre(0, 1, 2, 3));
  scheduler.Release("four");
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow + absl::Minutes(5))), ElementsAre("small2"));
}

TEST(Scheduler, RemoveDropsQueuedOnly) {
  Scheduler scheduler(FourGpus(), 1);
  scheduler.Enqueue(Cpu("a", "alice", 0));
  scheduler.Enqueue(Cpu("b", "alice", 1));
  EXPECT_TRUE(scheduler.Remove("b"));
  EXPECT_FALSE(scheduler.Remove("b"));
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre("a"));
  EXPECT_FALSE(scheduler.Remove("a"));
  EXPECT_EQ(scheduler.queued_count(), 0u);
}

TEST(Scheduler, UserGpuLimitHoldsExperimentsWithoutReservingGpus) {
  Scheduler scheduler(FourGpus(), /*cpu_slots=*/1);
  scheduler.SetUserGpuLimit([](const std::string& user) { return user == "alice" ? 2 : -1; });
  scheduler.Enqueue(Gpus("a1", "alice", 1, 2));
  scheduler.Enqueue(Gpus("a2", "alice", 2, 2));
  scheduler.Enqueue(Gpus("b1", "bob", 3, 2));
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre("a1", "b1"));
  EXPECT_EQ(scheduler.QueuePosition("a2"), 1);
  scheduler.Release("a1");
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre("a2"));
}

TEST(Scheduler, PreemptsTheLowestPriorityNewestAfterTheGracePeriod) {
  Scheduler scheduler(FourGpus(), /*cpu_slots=*/1);
  scheduler.Enqueue(Gpus("low-old", "alice", 1, 2));
  PendingExperiment mid = Gpus("mid", "bob", 2, 2);
  mid.priority = 3;
  scheduler.Enqueue(mid);
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre("mid", "low-old"));
  PendingExperiment urgent = Gpus("urgent", "carol", 3, 2);
  urgent.priority = 9;
  scheduler.Enqueue(urgent);
  const PreemptionRules rules{.min_priority = 5, .grace = absl::Seconds(30)};
  EXPECT_THAT(scheduler.DispatchReady(kNow), IsEmpty());  // starts urgent's wait
  EXPECT_THAT(scheduler.ChoosePreemption(kNow + absl::Seconds(29), rules).victims, IsEmpty());
  const Preemption preemption = scheduler.ChoosePreemption(kNow + absl::Seconds(30), rules);
  EXPECT_EQ(preemption.for_id, "urgent");
  EXPECT_THAT(preemption.victims, ElementsAre("low-old"));
  // Already being preempted: no second victim while its GPUs are on their way.
  EXPECT_THAT(scheduler.ChoosePreemption(kNow + absl::Seconds(31), rules).victims, IsEmpty());
  scheduler.Preempt("low-old");
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow + absl::Seconds(31))), ElementsAre("urgent"));
  EXPECT_EQ(scheduler.QueuePosition("low-old"), 1);
  scheduler.Release("urgent");
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow + absl::Seconds(32))), ElementsAre("low-old"));
}

TEST(Scheduler, NoPreemptionWhenOffOrOnlyEqualPriorityRuns) {
  Scheduler scheduler(FourGpus(), /*cpu_slots=*/1);
  PendingExperiment first = Gpus("first", "alice", 1, 4);
  first.priority = 9;
  scheduler.Enqueue(first);
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre("first"));
  PendingExperiment second = Gpus("second", "bob", 2, 2);
  second.priority = 9;
  scheduler.Enqueue(second);
  EXPECT_THAT(scheduler.DispatchReady(kNow), IsEmpty());
  const absl::Time later = kNow + absl::Hours(1);
  EXPECT_THAT(scheduler.ChoosePreemption(later, {.min_priority = 5}).victims, IsEmpty());
  EXPECT_THAT(scheduler.ChoosePreemption(later, {.min_priority = 0}).victims, IsEmpty());
}

PendingExperiment OnGpus(const std::string& id, const std::string& user, int64_t order,
                         std::vector<int> gpus) {
  PendingExperiment experiment{id, user, 0, order, {}, static_cast<int>(gpus.size())};
  for (int gpu : gpus) experiment.selection.add_gpu_ids(gpu);
  return experiment;
}

TEST(Scheduler, DrainedGpuIsNeverLeasedUntilUndrained) {
  Scheduler scheduler(FourGpus(), 1, /*reserve_after=*/absl::Minutes(2));
  scheduler.SetGpuDrained(1, true);
  EXPECT_TRUE(scheduler.IsDrained(1));
  // A count goes around it; explicit ids on it wait.
  scheduler.Enqueue(OnGpus("on1", "alice", 0, {0, 1}));
  scheduler.Enqueue(Gpus("two", "bob", 1, 2));
  scheduler.Enqueue(Gpus("one", "carol", 2, 1));
  const std::vector<Dispatch> first = scheduler.DispatchReady(kNow);
  ASSERT_THAT(Ids(first), ElementsAre("two", "one"));
  EXPECT_THAT(first[0].gpus, ElementsAre(2, 3));
  EXPECT_THAT(first[1].gpus, ElementsAre(0));
  // Waiting far longer than reserve_after for a drained GPU reserves nothing: a later
  // experiment still gets the free GPU.
  scheduler.Release("one");
  scheduler.Enqueue(Gpus("later", "dave", 3, 1));
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow + absl::Hours(1))), ElementsAre("later"));
  scheduler.Release("later");
  scheduler.SetGpuDrained(1, false);
  EXPECT_FALSE(scheduler.IsDrained(1));
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow + absl::Hours(1))), ElementsAre("on1"));
}

TEST(Scheduler, AGpuDrainedWhileLeasedIsNotFreedByRelease) {
  Scheduler scheduler(FourGpus(), 1);
  scheduler.Enqueue(OnGpus("running", "alice", 0, {2}));
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre("running"));
  scheduler.SetGpuDrained(2, true);
  EXPECT_EQ(scheduler.GpuLeases().at(2), "running");
  scheduler.Release("running");
  scheduler.Enqueue(OnGpus("next", "bob", 1, {2}));
  EXPECT_THAT(scheduler.DispatchReady(kNow), IsEmpty());
  // Undrained while free: leasable again.
  scheduler.SetGpuDrained(2, false);
  EXPECT_THAT(Ids(scheduler.DispatchReady(kNow)), ElementsAre("next"));
}

}  // namespace
}  // namespace gpuprof::daemon
