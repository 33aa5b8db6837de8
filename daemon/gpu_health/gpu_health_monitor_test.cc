// The monitor against the stand-in libnvidia-ml (gpu/nvml_loader_test_fake_nvml.cc), which
// takes its GPUs from FAKE_NVML_GPU_UUIDS and the faults to report from the file named by
// FAKE_NVML_CONTROL: real dlopen, real event waits, the daemon's own code end to end.
#include "daemon/gpu_health/gpu_health_monitor.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"

namespace gpuprof::daemon {
namespace {

using ::testing::HasSubstr;

std::string FakeNvmlPath() {
  const char* runfiles = std::getenv("TEST_SRCDIR");
  const std::string root = runfiles != nullptr ? std::string(runfiles) + "/gpuprof/" : "";
  return root + "gpu/libnvml_loader_test_fake_nvml.so";
}

v1::GpuInfo Gpu(int index, const std::string& uuid) {
  v1::GpuInfo gpu;
  gpu.set_index(index);
  gpu.set_uuid(uuid);
  return gpu;
}

class GpuHealthMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    control_ = std::string(std::getenv("TEST_TMPDIR")) + "/nvml_control";
    std::ofstream(control_).close();
    setenv("FAKE_NVML_CONTROL", control_.c_str(), 1);
    // Read once, when the fake library is first initialised in this process.
    setenv("FAKE_NVML_GPU_UUIDS", "GPU-h-0,GPU-h-1", 1);
  }

  void Inject(const std::string& line) { std::ofstream(control_, std::ios::app) << line << "\n"; }

  GpuHealthMonitor::Callbacks Record() {
    return {.on_fault =
                [this](const GpuFault& fault) {
                  absl::MutexLock lock(&mutex_);
                  faults_.push_back(fault);
                },
            .on_memory_errors =
                [this](int gpu, const v1::GpuMemoryErrors& errors) {
                  absl::MutexLock lock(&mutex_);
                  readings_[gpu] = errors;
                }};
  }

  // Waits (bounded) until `count` faults were reported.
  std::vector<GpuFault> WaitForFaults(size_t count) {
    absl::MutexLock lock(&mutex_);
    auto enough = [this, count]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
      return faults_.size() >= count;
    };
    mutex_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(60));
    return faults_;
  }

  std::string control_;
  absl::Mutex mutex_;
  std::vector<GpuFault> faults_ ABSL_GUARDED_BY(mutex_);
  std::map<int, v1::GpuMemoryErrors> readings_ ABSL_GUARDED_BY(mutex_);
};

TEST_F(GpuHealthMonitorTest, ReportsXidEventsOfTheRightGpuWithTheirClass) {
  auto monitor = GpuHealthMonitor::Start({Gpu(0, "GPU-h-0"), Gpu(1, "GPU-h-1")}, FakeNvmlPath(),
                                         absl::Hours(1), Record());
  ASSERT_TRUE(monitor.ok()) << monitor.status();
  EXPECT_THAT((*monitor)->xid_watched_gpus(), ::testing::ElementsAre(0, 1));
  Inject("xid GPU-h-1 13");
  Inject("xid GPU-h-0 79");
  const std::vector<GpuFault> faults = WaitForFaults(2);
  ASSERT_EQ(faults.size(), 2u);
  EXPECT_EQ(faults[0].gpu, 1);
  EXPECT_EQ(faults[0].xid, 13);
  EXPECT_EQ(faults[0].fault_class, v1::GPU_FAULT_CLASS_APPLICATION);
  EXPECT_EQ(faults[1].gpu, 0);
  EXPECT_EQ(faults[1].xid, 79);
  EXPECT_EQ(faults[1].fault_class, v1::GPU_FAULT_CLASS_HARDWARE);
  EXPECT_THAT(faults[1].description, HasSubstr("fallen off the bus"));
}

TEST_F(GpuHealthMonitorTest, ReadsTheCountersAndReportsRisingUncorrectableErrors) {
  Inject("ecc GPU-h-0 4 1");
  Inject("remap GPU-h-0 2 0 0 0");
  auto monitor = GpuHealthMonitor::Start({Gpu(0, "GPU-h-0")}, FakeNvmlPath(),
                                         absl::Milliseconds(50), Record());
  ASSERT_TRUE(monitor.ok()) << monitor.status();
  {
    absl::MutexLock lock(&mutex_);
    // The first reading happens before Start returns; what was there is history.
    ASSERT_TRUE(readings_.contains(0));
    EXPECT_EQ(readings_[0].ecc_corrected(), 4);
    EXPECT_EQ(readings_[0].ecc_uncorrected(), 1);
    EXPECT_EQ(readings_[0].remapped_rows_correctable(), 2);
    EXPECT_TRUE(faults_.empty());
  }
  Inject("ecc GPU-h-0 4 2");
  const std::vector<GpuFault> faults = WaitForFaults(1);
  ASSERT_FALSE(faults.empty());
  EXPECT_EQ(faults[0].gpu, 0);
  EXPECT_EQ(faults[0].fault_class, v1::GPU_FAULT_CLASS_HARDWARE);
  EXPECT_THAT(faults[0].description, HasSubstr("uncorrectable ECC errors rose from 1 to 2"));
}

TEST_F(GpuHealthMonitorTest, UnavailableWithoutNvmlAndNotFoundForUnknownGpus) {
  auto absent = GpuHealthMonitor::Start({Gpu(0, "GPU-h-0")}, "libnvidia-ml-absent.so.1",
                                        absl::Seconds(1), Record());
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kUnavailable);
  auto unknown = GpuHealthMonitor::Start({Gpu(0, "GPU-not-there")}, FakeNvmlPath(),
                                         absl::Seconds(1), Record());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpuprof::daemon
