#include "daemon/store/store_space_monitor.h"

#include <stdlib.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/store/experiment_store.h"
#include "daemon/store/store_test_support.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon {
namespace {

using store_testing::MakeExperiment;
using store_testing::StateEvent;

class StoreSpaceMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/space_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    directory_ = pattern;
    path_ = directory_ + "/gpuprof.db";
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  int64_t WalBytes() const {
    std::error_code error;
    const auto size = std::filesystem::file_size(path_ + "-wal", error);
    return error ? -1 : static_cast<int64_t>(size);
  }

  std::string directory_;
  std::string path_;
};

// A restart on a full disk must find the -shm file to read at all, and must write nothing.
TEST_F(StoreSpaceMonitorTest, ReopeningACompleteDatabaseWritesNothingAndKeepsTheWalFiles) {
  {
    ASSERT_OK_AND_ASSIGN(auto store, ExperimentStore::Open(path_));
    ASSERT_OK(store->Create(MakeExperiment("alice", v1::WORKLOAD_RADIX), StateEvent(1, v1::QUEUED))
                  .status());
  }
  EXPECT_TRUE(std::filesystem::exists(path_ + "-shm"));
  EXPECT_EQ(WalBytes(), 0) << "the WAL is emptied into the database at close, and kept";
  {
    ASSERT_OK_AND_ASSIGN(auto store, ExperimentStore::Open(path_));
    EXPECT_EQ(WalBytes(), 0) << "opening wrote to the database";
    ASSERT_OK_AND_ASSIGN(v1::Experiment stored, store->Get("exp-000001"));
    EXPECT_EQ(stored.user(), "alice");
    EXPECT_FALSE(store->disk_full());
  }
}

TEST_F(StoreSpaceMonitorTest, AWritableStoreIsNotReadOnlyAndItsFreeSpaceIsSampled) {
  ASSERT_OK_AND_ASSIGN(auto store, ExperimentStore::Open(path_));
  std::atomic<int> changes = 0;
  auto monitor = StoreSpaceMonitor::Start(
      *store, path_,
      {.interval = absl::Milliseconds(10), .on_change = [&](bool) { ++changes; }});
  EXPECT_FALSE(monitor->read_only());
  EXPECT_GT(monitor->free_bytes(), 0);
  ASSERT_OK_AND_ASSIGN(int64_t free, FreeBytesOnDiskHolding(path_));
  EXPECT_GT(free, 0);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(changes, 0);
}

TEST_F(StoreSpaceMonitorTest, TheWalIsEmptiedWhileWritable) {
  ASSERT_OK_AND_ASSIGN(auto store, ExperimentStore::Open(path_));
  ASSERT_OK(store->Create(MakeExperiment("alice", v1::WORKLOAD_RADIX), StateEvent(1, v1::QUEUED))
                .status());
  ASSERT_GT(WalBytes(), 0);
  auto monitor = StoreSpaceMonitor::Start(
      *store, path_,
      {.interval = absl::Milliseconds(10), .checkpoint_interval = absl::Milliseconds(10)});
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (WalBytes() != 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(WalBytes(), 0);
  ASSERT_OK_AND_ASSIGN(v1::Experiment stored, store->Get("exp-000001"));
  EXPECT_EQ(stored.user(), "alice");
}

TEST(DiskFullMessageTest, SaysWhatIsServedAndWhatToDo) {
  const std::string message = DiskFullMessage("/var/lib/gpuprof/gpuprof.db");
  EXPECT_NE(message.find("the disk holding /var/lib/gpuprof/gpuprof.db is full"),
            std::string::npos);
  EXPECT_NE(message.find("serving reads only"), std::string::npos);
  EXPECT_NE(message.find("Free space there"), std::string::npos);
}

}  // namespace
}  // namespace gpuprof::daemon
