#include "daemon/metrics/gpu_telemetry_reader.h"

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gpuprof::daemon {
namespace {

// The stand-in libnvidia-ml built for nvml_loader_test: GPUs at 1B:00.0 and 43:00.0 with
// 1 GiB of 80 GiB in use; temperature "Not Supported"; no power, utilisation, clock or
// clocks-event-reason functions at all.
std::string FakeNvmlPath() {
  const char* runfiles = std::getenv("TEST_SRCDIR");
  const std::string root = runfiles != nullptr ? std::string(runfiles) + "/gpuprof/" : "";
  return root + "gpu/libnvml_loader_test_fake_nvml.so";
}

v1::GpuInfo Gpu(int index, const std::string& pci_bus_id) {
  v1::GpuInfo gpu;
  gpu.set_index(index);
  gpu.set_pci_bus_id(pci_bus_id);
  return gpu;
}

TEST(GpuTelemetryReaderTest, ReadsWhatNvmlSupportsAndLeavesTheRestEmpty) {
  auto reader = GpuTelemetryReader::Create({Gpu(0, "00000000:1b:00.0"), Gpu(5, "00000000:43:00.0")},
                                           FakeNvmlPath());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->gpu_indices(), (std::vector<int>{0, 5}));

  const std::vector<GpuTelemetry> samples = (*reader)->Read();
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].gpu, 0);
  EXPECT_EQ(samples[1].gpu, 5);
  for (const GpuTelemetry& sample : samples) {
    ASSERT_TRUE(sample.memory_used_bytes.has_value());
    EXPECT_EQ(*sample.memory_used_bytes, double(uint64_t{1} << 30));
    ASSERT_TRUE(sample.memory_total_bytes.has_value());
    EXPECT_EQ(*sample.memory_total_bytes, double(uint64_t{80} << 30));
    // Unsupported or missing in this NVML: empty, never a made-up zero.
    EXPECT_FALSE(sample.temperature_celsius.has_value());
    EXPECT_FALSE(sample.power_watts.has_value());
    EXPECT_FALSE(sample.utilization_ratio.has_value());
    EXPECT_FALSE(sample.sm_clock_hertz.has_value());
    EXPECT_FALSE(sample.clocks_event_reasons.has_value());
  }
}

TEST(GpuTelemetryReaderTest, LeavesOutGpusThatNvmlDoesNotKnow) {
  auto reader = GpuTelemetryReader::Create({Gpu(0, "00000000:99:00.0"), Gpu(1, "00000000:43:00.0")},
                                           FakeNvmlPath());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->gpu_indices(), std::vector<int>{1});
  EXPECT_EQ((*reader)->Read().size(), 1u);
}

TEST(GpuTelemetryReaderTest, NotFoundWhenNvmlKnowsNoneOfTheGpus) {
  auto reader = GpuTelemetryReader::Create({Gpu(0, "00000000:99:00.0")}, FakeNvmlPath());
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kNotFound);
}

TEST(GpuTelemetryReaderTest, UnavailableWithoutNvml) {
  auto reader =
      GpuTelemetryReader::Create({Gpu(0, "00000000:1b:00.0")}, "/nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kUnavailable) << reader.status();
}

}  // namespace
}  // namespace gpuprof::daemon
