// GPUs drained by a hardware fault, kept across restarts until cleared.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/store/experiment_store.h"
#include "daemon/store/store_test_support.h"
#include "gmock/gmock.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/workloads.pb.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon::store_testing {
namespace {

using ::testing::IsEmpty;

TEST_F(ExperimentStoreTest, DrainedGpusSurviveReopenUntilCleared) {
  ASSERT_OK(store_->SaveDrainedGpu({"GPU-b", 1, 1'700'000'000'000'000'000, 79, "Xid 79 (bus)"}));
  ASSERT_OK(store_->SaveDrainedGpu({"GPU-a", 0, 1'700'000'001'000'000'000, 0, "ECC"}));
  // Saving again replaces: one record per GPU.
  ASSERT_OK(store_->SaveDrainedGpu({"GPU-b", 1, 1'700'000'002'000'000'000, 48, "Xid 48"}));
  Reopen();
  ASSERT_OK_AND_ASSIGN(std::vector<ExperimentStore::DrainedGpu> drained, store_->ListDrainedGpus());
  ASSERT_EQ(drained.size(), 2u);
  EXPECT_EQ(drained[0].uuid, "GPU-a");
  EXPECT_EQ(drained[0].reason, "ECC");
  EXPECT_EQ(drained[1].uuid, "GPU-b");
  EXPECT_EQ(drained[1].gpu_index, 1);
  EXPECT_EQ(drained[1].xid, 48);
  EXPECT_EQ(drained[1].since_unix_ns, 1'700'000'002'000'000'000);

  ASSERT_OK(store_->DeleteDrainedGpu("GPU-b"));
  EXPECT_EQ(store_->DeleteDrainedGpu("GPU-b").code(), absl::StatusCode::kNotFound);
  Reopen();
  ASSERT_OK_AND_ASSIGN(drained, store_->ListDrainedGpus());
  ASSERT_EQ(drained.size(), 1u);
  EXPECT_EQ(drained[0].uuid, "GPU-a");
}

TEST_F(ExperimentStoreTest, DatabaseWithoutTheGpuHealthTableGetsIt) {
  // A database written before GPU health existed: the table is added at the next open,
  // with what was stored untouched.
  const std::string id = CreateQueued("alice", v1::WORKLOAD_RADIX);
  store_.reset();
  RawQuery(path_, "DROP TABLE drained_gpus");
  ASSERT_EQ(RawQuery(path_, "SELECT count(*) FROM sqlite_master WHERE name = 'drained_gpus'"), "0");
  ASSERT_OK_AND_ASSIGN(store_, ExperimentStore::Open(path_));
  ASSERT_OK_AND_ASSIGN(std::vector<ExperimentStore::DrainedGpu> drained, store_->ListDrainedGpus());
  EXPECT_THAT(drained, IsEmpty());
  ASSERT_OK_AND_ASSIGN(v1::Experiment experiment, store_->Get(id));
  EXPECT_EQ(experiment.user(), "alice");
}

}  // namespace
}  // namespace gpuprof::daemon::store_testing
