// Holds a stream until the host releases it, so that the timed launches queued behind it run
// back to back and launch latency stays out of the measurement (nvbench's blocking kernel).
#ifndef GPUPROF_KERNELS_STREAM_BLOCKER_CUH_
#define GPUPROF_KERNELS_STREAM_BLOCKER_CUH_

#include "kernels/kernel_params.h"

// Named, not anonymous: see index_kernel.cuh.
namespace gpuprof::kernels::jit {

template <int kNumThreads>
__global__ void __launch_bounds__(kNumThreads, 1)
    StreamBlockerKernel(const __grid_constant__ StreamBlockerParams params) {
  static_assert(kNumThreads == 32, "one warp waits; more would only burn power");
  if (threadIdx.x != 0) return;
  unsigned long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (*params.release == 0) {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (static_cast<int64_t>(now - start) > params.timeout_ns) break;
    __nanosleep(256);
  }
}

}  // namespace gpuprof::kernels::jit

#endif  // GPUPROF_KERNELS_STREAM_BLOCKER_CUH_
