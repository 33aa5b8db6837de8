// The L2 flush's read kernel (nvcc-compiled; see l2_flush.h for its owner).
#ifndef GPUPROF_MEASURE_L2_FLUSH_KERNEL_H_
#define GPUPROF_MEASURE_L2_FLUSH_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace gpuprof::measure {

// Enqueues a kernel on `stream` that reads `bytes` (a multiple of 16) from `buffer` and writes
// nothing unless the bytes XOR to a value a zeroed buffer never gives (`sink` then gets it):
// the loads stay, and the L2 is left holding the buffer's lines, clean.
cudaError_t LaunchL2ReadFlushKernel(const void* buffer, int64_t bytes, uint32_t* sink,
                                    cudaStream_t stream);

}  // namespace gpuprof::measure

#endif  // GPUPROF_MEASURE_L2_FLUSH_KERNEL_H_
