// Needs a GPU: each GPU's copy bandwidth is timed, and plausible against its datasheet.
#include "measure/copy_bandwidth.h"

#include <gtest/gtest.h>

#include "gpu/gpu_probe.h"

namespace gpuprof::measure {
namespace {

TEST(CopyBandwidthGpuTest, EveryGpuIsTimedWithinItsDatasheet) {
  gpuprof::v1::ListGpusResponse response = gpu::ProbeHost({.gpuprof_version = "0.1.0-test"});
  ASSERT_GT(response.gpus_size(), 0) << "this test needs a GPU: " << response.probe_error();
  FillMeasuredCopyBandwidth(response, {.buffer_bytes = int64_t{256} << 20, .timed_iterations = 5});
  for (const auto& gpu : response.gpus()) {
    SCOPED_TRACE(gpu.name());
    // Read + written bytes: well above any PCIe figure, below twice the HBM's spec peak.
    EXPECT_GT(gpu.measured_copy_bandwidth_gbps(), 100);
    EXPECT_LT(gpu.measured_copy_bandwidth_gbps(), 2 * gpu.spec_peak_bandwidth_gbps());
    std::printf("GPU %d %s: copy %.0f GB/s (spec %.0f GB/s)\n", gpu.index(), gpu.name().c_str(),
                gpu.measured_copy_bandwidth_gbps(), gpu.spec_peak_bandwidth_gbps());
  }
}

}  // namespace
}  // namespace gpuprof::measure
