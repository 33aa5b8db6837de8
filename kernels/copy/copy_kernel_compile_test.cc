// The index and store kernels through NVRTC, which needs no GPU: every variant must compile
// for the architectures the daemon runs on, and the embedded sources must be complete.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/copy/copy_kernel_config.h"
#include "kernels/copy/copy_kernel_launch.h"
#include "kernels/copy/copy_kernel_sources.h"
#include "kernels/jit/jit_cache.h"

namespace gpuprof::kernels {
namespace {

using ::testing::StartsWith;

constexpr GpuArchitecture kHopper{9, 0};

JitRequest IndexJitRequest(CopyKernelConfig config) {
  auto request = CopyKernelJitRequest(config);
  EXPECT_TRUE(request.ok()) << request.status();
  return *request;
}

TEST(CopyKernelSourcesTest, EmbedsEveryKernelFile) {
  std::vector<std::string> paths;
  for (const KernelSource& source : CopyKernelSources()) {
    paths.emplace_back(source.path);
    EXPECT_FALSE(source.text.empty()) << source.path;
  }
  EXPECT_THAT(paths, ::testing::UnorderedElementsAre(
                         "kernels/copy/copy_kernel_params.h", "kernels/copy/copy_common.cuh",
                         "kernels/copy/index_kernel.cuh", "kernels/copy/store_kernel.cuh"));
}

TEST(CompileWithNvrtcTest, EveryVariantCompilesForAmpereAndHopper) {
  std::vector<CopyKernelConfig> configs;
  for (CopyKernelKind kind : {CopyKernelKind::kIndex, CopyKernelKind::kStore}) {
    for (bool variant : {false, true}) {
      configs.push_back({.kind = kind,
                         .row_bytes = 8192,
                         .num_splits = 1,
                         .vec_bytes = 16,
                         .threads = 128,
                         .max_occupancy = 1,
                         .use_pdl = variant,
                         .masked = variant,
                         .fused_kv = variant});
    }
    // Narrow vectors and split rows.
    configs.push_back({.kind = kind,
                       .row_bytes = 8190,
                       .num_splits = 1,
                       .vec_bytes = 2,
                       .threads = 256,
                       .max_occupancy = 2,
                       .use_pdl = false});
    configs.push_back({.kind = kind,
                       .row_bytes = 2048,
                       .num_splits = 4,
                       .vec_bytes = 8,
                       .threads = 64,
                       .max_occupancy = 1,
                       .use_pdl = false,
                       .masked = true,
                       .fused_kv = true});
  }
  for (const CopyKernelConfig& config : configs) {
    for (GpuArchitecture arch : {GpuArchitecture{8, 0}, kHopper}) {
      const JitRequest request = IndexJitRequest(config);
      auto binary = CompileWithNvrtc(request, arch);
      ASSERT_TRUE(binary.ok()) << request.name_expression << ": " << binary.status();
      EXPECT_FALSE(binary->cubin.empty());
      EXPECT_THAT(binary->lowered_name, StartsWith("_Z"));
      EXPECT_GT(binary->compile_ms, 0);
    }
  }
}

}  // namespace
}  // namespace gpuprof::kernels
