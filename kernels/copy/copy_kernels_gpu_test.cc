// The index and store kernels on a GPU, compiled by the JIT, against the CPU references.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "gtest/gtest.h"
#include "kernels/copy/copy_kernel_config.h"
#include "kernels/copy/copy_kernel_launch.h"
#include "kernels/copy/copy_reference.h"
#include "kernels/jit/jit_cache.h"
#include "kernels/jit/jit_module.h"

namespace gpuprof::kernels {
namespace {

#define ASSERT_OK(expr)                   \
  do {                                    \
    const absl::Status status_ = (expr);  \
    ASSERT_TRUE(status_.ok()) << status_; \
  } while (false)

#define ASSERT_OK_AND_ASSIGN(lhs, expr)            \
  auto lhs##_or = (expr);                          \
  ASSERT_TRUE(lhs##_or.ok()) << lhs##_or.status(); \
  auto lhs = std::move(*lhs##_or)

class CopyKernelsGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      GTEST_SKIP() << "no GPU";
    }
    cudaDeviceProp properties;
    ASSERT_EQ(cudaGetDeviceProperties(&properties, 0), cudaSuccess);
    arch_ = {properties.major, properties.minor};
    sm_count_ = properties.multiProcessorCount;
    const char* tmp = std::getenv("TEST_TMPDIR");
    cache_ = std::make_unique<JitCache>(std::string(tmp != nullptr ? tmp : "/tmp") +
                                        "/copy_kernels_gpu_test_jit");
    auto stream = CudaStream::Create();
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = std::move(*stream);
  }

  absl::StatusOr<JitKernel> Compile(const CopyKernelConfig& config) {
    auto request = CopyKernelJitRequest(config);
    if (!request.ok()) return request.status();
    auto binary = cache_->GetOrCompile(*request, arch_);
    if (!binary.ok()) return binary.status();
    return JitKernel::Load(*binary);
  }

  static absl::StatusOr<DeviceBuffer> Upload(const void* host, size_t bytes) {
    auto buffer = DeviceBuffer::Allocate(bytes);
    if (!buffer.ok()) return buffer.status();
    CUDA_RETURN_IF_ERROR(cudaMemcpy(buffer->data(), host, bytes, cudaMemcpyHostToDevice));
    return buffer;
  }

  void RunIndex(int64_t row_bytes, int64_t tokens, int64_t vocab, bool masked, bool use_pdl,
                int num_splits = 0) {
    SCOPED_TRACE(testing::Message() << "row " << row_bytes << " tokens " << tokens << " masked "
                                    << masked << " pdl " << use_pdl);
    const int64_t start = masked ? vocab / 4 : 0;
    const int64_t end = masked ? vocab / 2 : vocab;
    const int64_t table_rows = end - start;
    ASSERT_OK_AND_ASSIGN(config, ChooseCopyKernelConfig({.kind = CopyKernelKind::kIndex,
                                                         .row_bytes = row_bytes,
                                                         .num_tokens = tokens,
                                                         .num_splits = num_splits,
                                                         .use_pdl = use_pdl,
                                                         .masked = masked,
                                                         .sm_count = sm_count_}));
    ASSERT_OK_AND_ASSIGN(kernel, Compile(config));
    std::vector<std::byte> table(table_rows * row_bytes);
    FillRandomBytes(table, 11);
    const std::vector<int32_t> ids = GenerateTokenIds(tokens, vocab, 12);
    ASSERT_OK_AND_ASSIGN(table_device, Upload(table.data(), table.size()));
    ASSERT_OK_AND_ASSIGN(ids_device, Upload(ids.data(), ids.size() * sizeof(int32_t)));
    ASSERT_OK_AND_ASSIGN(out_device, DeviceBuffer::Allocate(tokens * row_bytes));
    ASSERT_EQ(cudaMemset(out_device.data(), 0xa5, out_device.bytes()), cudaSuccess);
    const IndexKernelParams params{.table = table_device.data(),
                                   .ids = ids_device.data_as<int32_t>(),
                                   .out = out_device.data(),
                                   .num_tokens = tokens,
                                   .vocab_start = static_cast<int32_t>(start),
                                   .vocab_end = static_cast<int32_t>(end)};
    ASSERT_OK(LaunchIndexKernel(kernel, config, params, stream_.get()));
    ASSERT_OK(stream_.Synchronize());
    std::vector<std::byte> out(tokens * row_bytes);
    ASSERT_EQ(cudaMemcpy(out.data(), out_device.data(), out.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    std::vector<std::byte> expected(out.size());
    ReferenceGather(table, ids, row_bytes, masked, start, end, expected);
    const ComparisonResult result = CompareElements(expected, out, ElementType::kFloat8E4M3);
    EXPECT_EQ(result.mismatches, 0) << "first mismatching byte " << result.first_mismatch;
  }

  void RunStore(int64_t row_bytes, int64_t tokens, int64_t cache_slots, int64_t page_size,
                SlotPattern pattern, bool fused, bool use_pdl) {
    SCOPED_TRACE(testing::Message()
                 << "row " << row_bytes << " tokens " << tokens << " page " << page_size
                 << " pattern " << static_cast<int>(pattern) << " fused " << fused);
    ASSERT_OK_AND_ASSIGN(config, ChooseCopyKernelConfig({.kind = CopyKernelKind::kStore,
                                                         .row_bytes = row_bytes,
                                                         .num_tokens = tokens,
                                                         .use_pdl = use_pdl,
                                                         .fused_kv = fused,
                                                         .sm_count = sm_count_}));
    ASSERT_OK_AND_ASSIGN(kernel, Compile(config));
    std::vector<std::byte> k(tokens * row_bytes), v(tokens * row_bytes);
    FillRandomBytes(k, 21);
    FillRandomBytes(v, 22);
    std::vector<std::byte> k_cache(cache_slots * row_bytes), v_cache(cache_slots * row_bytes);
    FillRandomBytes(k_cache, 23);
    FillRandomBytes(v_cache, 24);
    ASSERT_OK_AND_ASSIGN(slots, GenerateSlots(pattern, tokens, cache_slots, page_size, 25));
    ASSERT_OK_AND_ASSIGN(k_device, Upload(k.data(), k.size()));
    ASSERT_OK_AND_ASSIGN(v_device, Upload(v.data(), v.size()));
    ASSERT_OK_AND_ASSIGN(k_cache_device, Upload(k_cache.data(), k_cache.size()));
    ASSERT_OK_AND_ASSIGN(v_cache_device, Upload(v_cache.data(), v_cache.size()));
    ASSERT_OK_AND_ASSIGN(slots_device, Upload(slots.data(), slots.size() * sizeof(int32_t)));
    const StoreKernelParams params{.k = k_device.data(),
                                   .v = v_device.data(),
                                   .k_cache = k_cache_device.data(),
                                   .v_cache = v_cache_device.data(),
                                   .slots = slots_device.data_as<int32_t>(),
                                   .num_tokens = tokens};
    ASSERT_OK(LaunchStoreKernel(kernel, config, params, stream_.get()));
    ASSERT_OK(stream_.Synchronize());
    ReferenceScatter(k, slots, row_bytes, k_cache);
    ReferenceScatter(v, slots, row_bytes, v_cache);
    std::vector<std::byte> got(k_cache.size());
    ASSERT_EQ(cudaMemcpy(got.data(), k_cache_device.data(), got.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(CompareElements(k_cache, got, ElementType::kFloat8E4M3).mismatches, 0);
    ASSERT_EQ(cudaMemcpy(got.data(), v_cache_device.data(), got.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(CompareElements(v_cache, got, ElementType::kFloat8E4M3).mismatches, 0);
  }

  GpuArchitecture arch_;
  int sm_count_ = 0;
  std::unique_ptr<JitCache> cache_;
  CudaStream stream_;
};

TEST_F(CopyKernelsGpuTest, IndexMatchesReferenceOverSizes) {
  for (int64_t tokens : {1, 64, 4097}) {
    RunIndex(4096 * 2, tokens, 5000, /*masked=*/false, /*use_pdl=*/false);
  }
  RunIndex(1024 * 2, 300, 1000, false, false);
  RunIndex(8192 * 4, 70, 300, false, false);
  RunIndex(4095 * 2, 129, 1000, false, false);  // 2-byte vectors
  RunIndex(3, 33, 10, false, false);            // 1-byte vectors, a partial warp
  RunIndex(4096 * 2, 200, 1000, false, false, /*num_splits=*/4);
}

TEST_F(CopyKernelsGpuTest, MaskedIndexZeroesRowsOutsideTheShard) {
  RunIndex(4096 * 2, 1000, 4000, /*masked=*/true, /*use_pdl=*/false);
  RunIndex(100 * 2, 1000, 4000, /*masked=*/true, /*use_pdl=*/false);
}

TEST_F(CopyKernelsGpuTest, IndexWithProgrammaticDependentLaunch) {
  RunIndex(4096 * 2, 64, 1000, false, /*use_pdl=*/true);
}

TEST_F(CopyKernelsGpuTest, StoreMatchesReferenceForEveryPatternAndLaunch) {
  for (SlotPattern pattern :
       {SlotPattern::kSequential, SlotPattern::kRandom, SlotPattern::kSorted}) {
    for (bool fused : {true, false}) {
      RunStore(8 * 128 * 2, 1000, 4096, 1, pattern, fused, false);
      RunStore(8 * 128 * 2, 77, 4096, 16, pattern, fused, false);
    }
  }
  RunStore(1 * 64 * 2, 5, 64, 1, SlotPattern::kRandom, true, false);
  RunStore(2 * 96 * 1, 500, 1024, 4, SlotPattern::kRandom, true, true);
}


}  // namespace
}  // namespace gpuprof::kernels
