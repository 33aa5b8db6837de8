#include "cupti/current_context.h"

#include <cuda_runtime_api.h>

#include "common/cuda_driver_entry.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"

namespace gpuprof::cupti {

absl::StatusOr<CUcontext> CurrentCudaContext() {
  // Makes the runtime create (or bind) the device's primary context on this thread.
  CUDA_RETURN_IF_ERROR(cudaFree(nullptr));
  ASSIGN_OR_RETURN(auto* ctx_get_current,
                   CudaDriverEntry<CUresult (*)(CUcontext*)>("cuCtxGetCurrent"));
  CUcontext context = nullptr;
  CU_RETURN_IF_ERROR(ctx_get_current(&context));
  if (context == nullptr) return absl::FailedPreconditionError("no current CUDA context");
  return context;
}

}  // namespace gpuprof::cupti
