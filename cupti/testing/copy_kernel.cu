#include "cupti/testing/copy_kernel.h"

namespace gpuprof::cupti::testing {
namespace {

__global__ void __launch_bounds__(kCopyThreadsPerBlock)
    CopyKernel(const int4* __restrict__ source, int4* __restrict__ destination, size_t count) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    destination[i] = source[i];
  }
}

}  // namespace

cudaError_t LaunchCopyKernel(const void* source, void* destination, size_t bytes, int blocks,
                             cudaStream_t stream) {
  CopyKernel<<<blocks, kCopyThreadsPerBlock, 0, stream>>>(
      static_cast<const int4*>(source), static_cast<int4*>(destination), bytes / sizeof(int4));
  return cudaGetLastError();
}

}  // namespace gpuprof::cupti::testing
