#include "daemon/experiment_record.h"

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

}  // namespace
}  // namespace gpuprof::daemon
