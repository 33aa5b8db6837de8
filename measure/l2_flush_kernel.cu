// Reads the flush buffer through the L2. A read evicts what the previous sample left (its
// dirty lines are written back now, before the clock starts) and leaves only clean lines, so
// the timed kernel's first misses cost no write-back of someone else's data.
#include "measure/l2_flush_kernel.h"

#include <algorithm>

namespace gpuprof::measure {
namespace {

struct L2ReadFlushParams {
  const uint4* data;
  int64_t vectors;
  uint32_t* sink;
};

// Never the XOR of a zeroed buffer (0): the store below is kept by the compiler, never made.
inline constexpr uint32_t kUnreachedXor = 0x9e3779b9u;

template <int kNumThreads>
__global__ void __launch_bounds__(kNumThreads)
    L2ReadFlushKernel(const __grid_constant__ L2ReadFlushParams params) {
  uint32_t folded = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kNumThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kNumThreads + threadIdx.x;
       i < params.vectors; i += stride) {
    const uint4 v = params.data[i];  // ld.global: allocated in the L2 like any read
    folded ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (folded == kUnreachedXor) *params.sink = folded;
}

}  // namespace

cudaError_t LaunchL2ReadFlushKernel(const void* buffer, int64_t bytes, uint32_t* sink,
                                    cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t vectors = bytes / 16;
  // Eight 16-byte loads a thread: enough blocks to fill every SM of the largest GPUs.
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(8192, vectors / (kThreads * 8)));
  L2ReadFlushKernel<kThreads><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      L2ReadFlushParams{.data = static_cast<const uint4*>(buffer), .vectors = vectors,
                        .sink = sink});
  return cudaGetLastError();
}

}  // namespace gpuprof::measure
