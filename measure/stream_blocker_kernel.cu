// Holds a stream until the host releases it, so that the timed launches queued behind it run
// back to back and launch latency stays out of the measurement (nvbench's blocking kernel).
#include "measure/stream_blocker_kernel.h"

namespace gpuprof::measure {

struct StreamBlockerParams {
  const volatile int32_t* release;
  int64_t timeout_ns;
};

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

cudaError_t LaunchStreamBlockerKernel(const int32_t* release, int64_t timeout_ns,
                                      cudaStream_t stream) {
  constexpr int kThreads = 32;
  StreamBlockerKernel<kThreads><<<1, kThreads, 0, stream>>>(
      StreamBlockerParams{.release = release, .timeout_ns = timeout_ns});
  return cudaGetLastError();
}

}  // namespace gpuprof::measure
