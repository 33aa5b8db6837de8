// A plain device-to-device copy kernel for the CUPTI GPU tests and the tracing overhead
// benchmark: memory-bound, 16-byte accesses, grid-stride.
#ifndef GPUPROF_CUPTI_TESTING_COPY_KERNEL_H_
#define GPUPROF_CUPTI_TESTING_COPY_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstddef>

namespace gpuprof::cupti::testing {

inline constexpr int kCopyThreadsPerBlock = 256;

// Copies `bytes` (a multiple of 16) from `source` to `destination` on `stream` with `blocks`
// blocks of kCopyThreadsPerBlock threads.
cudaError_t LaunchCopyKernel(const void* source, void* destination, size_t bytes, int blocks,
                             cudaStream_t stream);

}  // namespace gpuprof::cupti::testing

#endif  // GPUPROF_CUPTI_TESTING_COPY_KERNEL_H_
