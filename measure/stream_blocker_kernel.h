// The stream blocker's kernel launcher (nvcc-compiled; see stream_blocker.h for its owner).
#ifndef GPUPROF_MEASURE_STREAM_BLOCKER_KERNEL_H_
#define GPUPROF_MEASURE_STREAM_BLOCKER_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace gpuprof::measure {

// Enqueues one warp on `stream` that spins until `*release` (host memory mapped into the
// device's address space) becomes non-zero or `timeout_ns` passes.
cudaError_t LaunchStreamBlockerKernel(const int32_t* release, int64_t timeout_ns,
                                      cudaStream_t stream);

}  // namespace gpuprof::measure

#endif  // GPUPROF_MEASURE_STREAM_BLOCKER_KERNEL_H_
