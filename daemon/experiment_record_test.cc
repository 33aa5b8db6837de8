#include "daemon/experiment_record.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpuprof::daemon {
namespace {

google::protobuf::Timestamp At(int64_t seconds) {
  google::protobuf::Timestamp time;
  time.set_seconds(seconds);
  return time;
}

v1::ExperimentEvent Numbered(v1::ExperimentEvent event, int64_t seq, int64_t seconds) {
  event.set_seq(seq);
  *event.mutable_time() = At(seconds);
  return event;
}

TEST(ApplyEventTest, RunningTakesItsGpusAndStartTimeAndLeavesTheQueue) {
  v1::Experiment experiment;
  experiment.set_state(v1::QUEUED);
  experiment.set_queue_position(3);
  v1::ExperimentEvent running = StateEvent(v1::RUNNING);
  running.mutable_state()->add_gpu_ids(2);
  ApplyEvent(Numbered(running, 2, 100), experiment);
  EXPECT_EQ(experiment.state(), v1::RUNNING);
  EXPECT_EQ(experiment.last_seq(), 2);
  EXPECT_EQ(experiment.gpu_ids_size(), 1);
  EXPECT_EQ(experiment.started().seconds(), 100);
  EXPECT_EQ(experiment.queue_position(), 0);
  EXPECT_FALSE(experiment.has_finished());
}

// After a preemption the new run starts afresh: the old reason goes.
TEST(ApplyEventTest, ARunAfterAPreemptionClearsTheOldReason) {
  v1::Experiment experiment;
  ApplyEvent(Numbered(StateEvent(v1::PREEMPTED, "a higher priority came"), 3, 10), experiment);
  EXPECT_EQ(experiment.reason(), "a higher priority came");
  ApplyEvent(Numbered(StateEvent(v1::RUNNING), 4, 20), experiment);
  EXPECT_TRUE(experiment.reason().empty());
}

TEST(ApplyEventTest, AnEndStateSetsTheEndTimeAndKeepsTheWorkersStderr) {
  v1::Experiment experiment;
  v1::ExperimentEvent failed = StateEvent(v1::FAILED, "rank 1: illegal address");
  failed.mutable_state()->set_worker_stderr_tail("CUDA error 700");
  ApplyEvent(Numbered(failed, 5, 50), experiment);
  EXPECT_EQ(experiment.state(), v1::FAILED);
  EXPECT_EQ(experiment.reason(), "rank 1: illegal address");
  EXPECT_EQ(experiment.worker_stderr_tail(), "CUDA error 700");
  EXPECT_EQ(experiment.finished().seconds(), 50);
}

TEST(ApplyEventTest, AResultIsKeptAndTheStateIsNot) {
  v1::Experiment experiment;
  experiment.set_state(v1::RUNNING);
  v1::ExperimentEvent result;
  result.mutable_result()->mutable_measurement()->set_bandwidth_gbps(2900);
  ApplyEvent(Numbered(result, 7, 70), experiment);
  EXPECT_EQ(experiment.state(), v1::RUNNING);
  EXPECT_EQ(experiment.result().measurement().bandwidth_gbps(), 2900);
  EXPECT_EQ(experiment.last_seq(), 7);
}

TEST(InterruptedAtRestartTest, TheNextSeqEndsTheRunAtRestartTime) {
  v1::Experiment experiment;
  experiment.set_id("exp-000007");
  experiment.set_state(v1::RUNNING);
  experiment.set_last_seq(4);
  const auto [interrupted, event] = InterruptedAtRestart(experiment, At(900));
  EXPECT_EQ(event.experiment_id(), "exp-000007");
  EXPECT_EQ(event.seq(), 5);
  EXPECT_EQ(event.state().state(), v1::INTERRUPTED);
  EXPECT_EQ(interrupted.state(), v1::INTERRUPTED);
  EXPECT_EQ(interrupted.last_seq(), 5);
  EXPECT_EQ(interrupted.reason(), "gpuprofd stopped while the experiment ran");
  EXPECT_EQ(interrupted.finished().seconds(), 900);
}

v1::Experiment CreatedAt(const std::string& id, int64_t seconds) {
  v1::Experiment experiment;
  experiment.set_id(id);
  *experiment.mutable_created() = At(seconds);
  return experiment;
}

TEST(RecoveredSubmitOrdersTest, AnInterruptedPointKeepsItsPlaceAmongTheQueuedOnes) {
  // Queued at restart: created at 10, 20, 30. Interrupted points created at 15, 5, 15 and 40.
  const std::vector<v1::Experiment> queued = {CreatedAt("q10", 10), CreatedAt("q20", 20),
                                              CreatedAt("q30", 30)};
  const std::vector<v1::Experiment> interrupted = {CreatedAt("p15a", 15), CreatedAt("p5", 5),
                                                   CreatedAt("p15b", 15), CreatedAt("p40", 40)};
  const RecoveredOrders orders = RecoveredSubmitOrders(queued, interrupted);
  ASSERT_EQ(orders.queued.size(), 3u);
  ASSERT_EQ(orders.interrupted.size(), 4u);
  // Everything in creation order, a tie in the order given; new submissions after all.
  const std::vector<int64_t> in_order = {
      orders.interrupted.at("p5"),   orders.queued[0], orders.interrupted.at("p15a"),
      orders.interrupted.at("p15b"), orders.queued[1], orders.queued[2],
      orders.interrupted.at("p40"),  orders.next};
  for (size_t i = 1; i < in_order.size(); ++i) {
    EXPECT_LT(in_order[i - 1], in_order[i]) << "at " << i;
  }
}

TEST(RecoveredSubmitOrdersTest, PointsCreatedTogetherAreOrderedByTheirIds) {
  // A sweep's points are created at one time: point 1 (exp-000002) was interrupted, points 2
  // and 3 still queued.
  const RecoveredOrders orders =
      RecoveredSubmitOrders({CreatedAt("exp-000003", 50), CreatedAt("exp-000004", 50)},
                            {CreatedAt("exp-000002", 50)});
  EXPECT_LT(orders.interrupted.at("exp-000002"), orders.queued[0]);
  EXPECT_LT(orders.queued[0], orders.queued[1]);
}

TEST(RecoveredSubmitOrdersTest, WithoutInterruptedPointsTheQueueKeepsItsOrder) {
  const RecoveredOrders orders =
      RecoveredSubmitOrders({CreatedAt("a", 30), CreatedAt("b", 10)}, {});
  ASSERT_EQ(orders.queued.size(), 2u);
  EXPECT_LT(orders.queued[0], orders.queued[1]);
  EXPECT_LT(orders.queued[1], orders.next);
}

}  // namespace
}  // namespace gpuprof::daemon
