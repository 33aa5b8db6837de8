// The compile as the worker runs it: in a process whose CUDA context reserves far more address
// space than the compile's memory limit, which therefore bounds what the compile adds.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/custom/user_kernel_compile.h"

namespace gpuprof::kernels {
namespace {

int64_t AddressSpaceBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0;
  statm >> pages;
  return pages * sysconf(_SC_PAGESIZE);
}

TEST(UserKernelCompileGpuTest, CompilesBesideACudaContext) {
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);
  int device = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  cudaDeviceProp properties{};
  ASSERT_EQ(cudaGetDeviceProperties(&properties, device), cudaSuccess);
  const int64_t limit = int64_t{1} << 30;
  // The context alone is past the limit (13 GiB on an H200): an absolute limit would fail
  // every compile.
  EXPECT_GT(AddressSpaceBytes(), limit);

  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string directory = std::string(tmp != nullptr ? tmp : "/tmp") + "/gpu_compile";
  std::filesystem::remove_all(directory);
  const UserKernelCompileRequest request{
      .source = "extern \"C\" __global__ void fill(int* out) { out[threadIdx.x] = 7; }\n",
      .file_name = "fill.cu",
      .kernel_name = "fill",
      .options = {"-lineinfo"},
      .arch = {properties.major, properties.minor}};
  auto binary = CompileUserKernel(request, {.memory_bytes = limit}, JitCache(directory));
  ASSERT_TRUE(binary.ok()) << binary.status();
  EXPECT_FALSE(binary->cubin.empty());
  EXPECT_FALSE(binary->cache_hit);
}

}  // namespace
}  // namespace gpuprof::kernels
