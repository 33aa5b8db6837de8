// GpuHealthState against a real ExperimentStore on a temporary file: a drain shows in ListGpus'
// fields and is stored, a clear returns the GPU to service on disk too, and a new state on a
// reopened store (a restarted daemon) finds the drain again by the GPU's UUID.
#include "daemon/gpu_health/gpu_health_state.h"

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/gpu_health/gpu_faults.h"
#include "daemon/store/experiment_store.h"
#include "gpuprof/v1/gpus.pb.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon {
namespace {

v1::ListGpusResponse Inventory(const std::vector<std::string>& uuids) {
  v1::ListGpusResponse inventory;
  for (size_t i = 0; i < uuids.size(); ++i) {
    v1::GpuInfo& gpu = *inventory.add_gpus();
    gpu.set_index(static_cast<int>(i));
    gpu.set_uuid(uuids[i]);
  }
  return inventory;
}

// ListGpus' view of one GPU.
v1::GpuInfo Shown(const GpuHealthState& health, const v1::GpuInfo& gpu) {
  v1::GpuInfo shown = gpu;
  health.Fill(shown);
  return shown;
}

const absl::Time kDrainTime = absl::FromUnixSeconds(1'700'000'000) + absl::Milliseconds(250);

class GpuHealthStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string directory = ::testing::TempDir() + "gpu_health_state_test.XXXXXX";
    ASSERT_NE(mkdtemp(directory.data()), nullptr);
    directory_ = directory;
    Open();
  }
  void TearDown() override {
    health_.reset();
    store_.reset();
    std::filesystem::remove_all(directory_);
  }
  // Opens the store afresh with a new health state, as a restarted daemon does.
  void Open() {
    health_.reset();
    store_.reset();
    auto store = ExperimentStore::Open(directory_ + "/experiments.db");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    health_ = std::make_unique<GpuHealthState>(*store_);
  }
  std::vector<ExperimentStore::DrainedGpu> Stored() {
    auto drained = store_->ListDrainedGpus();
    EXPECT_TRUE(drained.ok()) << drained.status();
    return drained.ok() ? *drained : std::vector<ExperimentStore::DrainedGpu>{};
  }

  std::string directory_;
  std::unique_ptr<ExperimentStore> store_;
  std::unique_ptr<GpuHealthState> health_;
  const v1::ListGpusResponse inventory_ = Inventory({"GPU-aaaa", "GPU-bbbb"});
};

TEST_F(GpuHealthStateTest, NotWatchedGpusShowNoHealthAndWatchedOnesHealthy) {
  EXPECT_EQ(Shown(*health_, inventory_.gpus(0)).health(), v1::GPU_HEALTH_UNSPECIFIED);
  health_->SetWatched({1});
  EXPECT_EQ(Shown(*health_, inventory_.gpus(0)).health(), v1::GPU_HEALTH_UNSPECIFIED);
  EXPECT_EQ(Shown(*health_, inventory_.gpus(1)).health(), v1::GPU_HEALTH_HEALTHY);
}

TEST_F(GpuHealthStateTest, XidsAreCountedAndTheLastKeptWithoutDraining) {
  health_->SetWatched({0, 1});
  health_->RecordXid(0, 13);
  health_->RecordXid(0, 31);
  const v1::GpuInfo shown = Shown(*health_, inventory_.gpus(0));
  EXPECT_EQ(shown.health(), v1::GPU_HEALTH_HEALTHY);
  EXPECT_EQ(shown.last_xid(), 31);
  EXPECT_EQ(shown.xid_events(), 2);
  EXPECT_EQ(Shown(*health_, inventory_.gpus(1)).xid_events(), 0);
  EXPECT_FALSE(health_->IsDrained(0));
}

TEST_F(GpuHealthStateTest, HardwareFaultDrainsTheGpuAndStoresTheDrain) {
  health_->SetWatched({0, 1});
  const GpuFault fault = XidFault(1, 79);
  const GpuHealthState::DrainResult drained = health_->Drain(inventory_.gpus(1), fault, kDrainTime);
  EXPECT_TRUE(drained.drained_now);
  EXPECT_TRUE(drained.stored.ok()) << drained.stored;
  EXPECT_TRUE(health_->IsDrained(1));
  EXPECT_FALSE(health_->IsDrained(0));

  const v1::GpuInfo shown = Shown(*health_, inventory_.gpus(1));
  EXPECT_EQ(shown.health(), v1::GPU_HEALTH_UNHEALTHY);
  EXPECT_EQ(shown.health_reason(), fault.description);
  EXPECT_EQ(shown.unhealthy_since().seconds(), 1'700'000'000);
  EXPECT_EQ(shown.unhealthy_since().nanos(), 250'000'000);

  const std::vector<ExperimentStore::DrainedGpu> stored = Stored();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].uuid, "GPU-bbbb");
  EXPECT_EQ(stored[0].gpu_index, 1);
  EXPECT_EQ(stored[0].xid, 79);
  EXPECT_EQ(stored[0].reason, fault.description);
  EXPECT_EQ(stored[0].since_unix_ns, absl::ToUnixNanos(kDrainTime));
}

TEST_F(GpuHealthStateTest, ASecondFaultKeepsTheFirstReason) {
  const GpuFault first = XidFault(0, 79);
  ASSERT_TRUE(health_->Drain(inventory_.gpus(0), first, kDrainTime).drained_now);
  const GpuHealthState::DrainResult again =
      health_->Drain(inventory_.gpus(0), XidFault(0, 48), kDrainTime + absl::Minutes(1));
  EXPECT_FALSE(again.drained_now);
  EXPECT_EQ(Shown(*health_, inventory_.gpus(0)).health_reason(), first.description);
  const std::vector<ExperimentStore::DrainedGpu> stored = Stored();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].xid, 79);
}

TEST_F(GpuHealthStateTest, ClearReturnsTheGpuToServiceOnDiskToo) {
  health_->SetWatched({0, 1});
  const GpuFault fault = XidFault(0, 79);
  ASSERT_TRUE(health_->Drain(inventory_.gpus(0), fault, kDrainTime).drained_now);
  const absl::StatusOr<std::string> was = health_->Clear(inventory_.gpus(0));
  ASSERT_TRUE(was.ok()) << was.status();
  EXPECT_EQ(*was, fault.description);
  EXPECT_FALSE(health_->IsDrained(0));
  const v1::GpuInfo shown = Shown(*health_, inventory_.gpus(0));
  EXPECT_EQ(shown.health(), v1::GPU_HEALTH_HEALTHY);
  EXPECT_EQ(shown.last_xid(), 0);  // the drain alone records no Xid event: RecordXid does
  EXPECT_TRUE(Stored().empty());

  // Nothing is left to clear, and the error says so.
  const absl::StatusOr<std::string> again = health_->Clear(inventory_.gpus(0));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(again.status().message(), "GPU 0 is not drained; there is nothing to clear");
}

TEST_F(GpuHealthStateTest, ADrainOutlivesARestartAndFollowsTheGpuByUuid) {
  ASSERT_TRUE(health_->Drain(inventory_.gpus(0), XidFault(0, 79), kDrainTime).drained_now);
  Open();
  // After the restart GPU-aaaa is index 1 (a GPU was added in front of it).
  const v1::ListGpusResponse now = Inventory({"GPU-new", "GPU-aaaa", "GPU-bbbb"});
  const absl::StatusOr<GpuHealthState::Restored> restored = health_->Restore(now);
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_EQ(restored->drained.size(), 1u);
  EXPECT_EQ(restored->drained[0].gpu_index, 1);
  EXPECT_EQ(restored->drained[0].xid, 79);
  EXPECT_TRUE(restored->missing.empty());
  EXPECT_FALSE(health_->IsDrained(0));
  EXPECT_TRUE(health_->IsDrained(1));
  const v1::GpuInfo shown = Shown(*health_, now.gpus(1));
  EXPECT_EQ(shown.health(), v1::GPU_HEALTH_UNHEALTHY);
  EXPECT_EQ(shown.health_reason(), XidFault(0, 79).description);
  EXPECT_EQ(shown.last_xid(), 79);
  EXPECT_EQ(shown.unhealthy_since().seconds(), 1'700'000'000);

  // Cleared after the restart: gone from the store, so the next restart restores nothing.
  ASSERT_TRUE(health_->Clear(now.gpus(1)).ok());
  Open();
  const absl::StatusOr<GpuHealthState::Restored> after = health_->Restore(now);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(after->drained.empty());
  EXPECT_FALSE(health_->IsDrained(1));
}

TEST_F(GpuHealthStateTest, ADrainOfAGpuNoLongerHereStaysStoredButDrainsNothing) {
  ASSERT_TRUE(health_->Drain(inventory_.gpus(1), XidFault(1, 79), kDrainTime).drained_now);
  Open();
  const absl::StatusOr<GpuHealthState::Restored> restored =
      health_->Restore(Inventory({"GPU-aaaa"}));
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_TRUE(restored->drained.empty());
  ASSERT_EQ(restored->missing.size(), 1u);
  EXPECT_EQ(restored->missing[0].uuid, "GPU-bbbb");
  EXPECT_EQ(restored->missing[0].gpu_index, 1);  // where it was when drained
  EXPECT_FALSE(health_->IsDrained(0));
  EXPECT_EQ(Stored().size(), 1u);
}

TEST_F(GpuHealthStateTest, MemoryErrorCountersAreShownAsLastRead) {
  v1::GpuMemoryErrors errors;
  errors.set_ecc_uncorrected(3);
  health_->SetMemoryErrors(0, errors);
  errors.set_ecc_uncorrected(5);
  health_->SetMemoryErrors(0, errors);
  const v1::GpuInfo shown = Shown(*health_, inventory_.gpus(0));
  ASSERT_TRUE(shown.has_memory_errors());
  EXPECT_EQ(shown.memory_errors().ecc_uncorrected(), 5);
  EXPECT_FALSE(Shown(*health_, inventory_.gpus(1)).has_memory_errors());
}

}  // namespace
}  // namespace gpuprof::daemon
