// What every probe answer must satisfy, on any machine and on a GPU: shared by
// gpu_probe_test (CPU) and gpu_probe_gpu_test.
#ifndef GPUPROF_GPU_GPU_PROBE_EXPECTATIONS_H_
#define GPUPROF_GPU_GPU_PROBE_EXPECTATIONS_H_

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu/gpu_probe.h"
#include "proto/gpuprof/v1/gpus.pb.h"

namespace gpuprof::gpu {

// Checks that hold for every GPU the probe lists.
inline void ExpectSaneGpu(const ::gpuprof::v1::GpuInfo& gpu) {
  SCOPED_TRACE("GPU " + std::to_string(gpu.index()) + " " + gpu.name());
  EXPECT_FALSE(gpu.name().empty());
  EXPECT_THAT(gpu.uuid(), ::testing::MatchesRegex("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
                                       "[0-9a-f]{12}"));
  EXPECT_TRUE(ParsePciBusId(gpu.pci_bus_id()).has_value()) << gpu.pci_bus_id();
  EXPECT_GT(gpu.total_memory_bytes(), 0);
  EXPECT_GT(gpu.sm_count(), 0);
  EXPECT_GE(gpu.compute_capability_major(), 7);
  EXPECT_GT(gpu.max_sm_clock_mhz(), 0);
  EXPECT_GT(gpu.memory_clock_mhz(), 0);
  EXPECT_GT(gpu.memory_bus_width_bits(), 0);
  EXPECT_GT(gpu.l2_cache_bytes(), 0);
  EXPECT_GT(gpu.spec_peak_bandwidth_gbps(), 100);
  EXPECT_GE(gpu.numa_node(), -1);
  if (PeaksForComputeCapability(gpu.compute_capability_major(), gpu.compute_capability_minor())
          .has_value()) {
    EXPECT_GT(gpu.spec_peak_bf16_tflops(), 0);
    EXPECT_GT(gpu.spec_peak_fp32_tflops(), 0);
  }
}

inline void ExpectCoherentLinks(const ::gpuprof::v1::ListGpusResponse& response) {
  const int gpu_count = response.gpus_size();
  ASSERT_EQ(response.links_size(), gpu_count * (gpu_count - 1));
  for (const ::gpuprof::v1::GpuLink& link : response.links()) {
    EXPECT_NE(link.gpu_a(), link.gpu_b());
    EXPECT_NE(link.type(), ::gpuprof::v1::LINK_TYPE_UNSPECIFIED);
    EXPECT_NE(link.type(), ::gpuprof::v1::LINK_TYPE_SELF);
    if (link.type() != ::gpuprof::v1::LINK_TYPE_NVLINK) {
      EXPECT_EQ(link.nvlink_count(), 0);
    }
  }
}

}  // namespace gpuprof::gpu

#endif  // GPUPROF_GPU_GPU_PROBE_EXPECTATIONS_H_
