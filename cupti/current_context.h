// The calling thread's current CUDA context, which the CUPTI profiling and PC sampling APIs
// take. libcuda is not linked (see @local_cuda//:cuda_driver), so cuCtxGetCurrent is reached
// through the runtime's driver entry point.
#ifndef GPUPROF_CUPTI_CURRENT_CONTEXT_H_
#define GPUPROF_CUPTI_CURRENT_CONTEXT_H_

#include <cuda.h>

#include "absl/status/statusor.h"

namespace gpuprof::cupti {

// The current context of the current device, creating the device's primary context first if
// the runtime has not yet.
absl::StatusOr<CUcontext> CurrentCudaContext();

}  // namespace gpuprof::cupti

#endif  // GPUPROF_CUPTI_CURRENT_CONTEXT_H_
