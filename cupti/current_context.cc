#include "cupti/current_context.h"

#include <cuda_runtime_api.h>

#include "common/cuda_status.h"
#include "common/status_macros.h"

namespace gpuprof::cupti {

absl::StatusOr<CUcontext> CurrentCudaContext() {
  // Makes the runtime create (or bind) the device's primary context on this thread.
  CUDA_RETURN_IF_ERROR(cudaFree(nullptr));
  using CtxGetCurrent = CUresult (*)(CUcontext*);
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  CUDA_RETURN_IF_ERROR(
      cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &entry, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || entry == nullptr) {
    return absl::FailedPreconditionError("the CUDA driver has no cuCtxGetCurrent");
  }
  CUcontext context = nullptr;
  CU_RETURN_IF_ERROR(reinterpret_cast<CtxGetCurrent>(entry)(&context));
  if (context == nullptr) return absl::FailedPreconditionError("no current CUDA context");
  return context;
}

}  // namespace gpuprof::cupti
