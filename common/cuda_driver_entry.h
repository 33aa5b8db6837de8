// CUDA driver API functions reached through the runtime's driver entry point: libcuda is never
// linked (machines without a GPU lack it; see @local_cuda//:cuda_driver), so a caller that needs
// the driver API looks the function up by name.
//
//   ASSIGN_OR_RETURN(auto* get, CudaDriverEntry<CUresult (*)(CUcontext*)>("cuCtxGetCurrent"));
#ifndef GPUPROF_COMMON_CUDA_DRIVER_ENTRY_H_
#define GPUPROF_COMMON_CUDA_DRIVER_ENTRY_H_

#include "absl/status/statusor.h"
#include "common/status_macros.h"

namespace gpuprof {

// The driver function `symbol` with the signature it had in CUDA 12.0 (the version the
// PFN_..._v12000 typedefs of cudaTypedefs.h describe). FAILED_PRECONDITION when the driver
// lacks it; the runtime's error when there is no driver.
absl::StatusOr<void*> CudaDriverEntryPoint(const char* symbol);

template <typename Function>
absl::StatusOr<Function> CudaDriverEntry(const char* symbol) {
  ASSIGN_OR_RETURN(void* function, CudaDriverEntryPoint(symbol));
  return reinterpret_cast<Function>(function);
}

}  // namespace gpuprof

#endif  // GPUPROF_COMMON_CUDA_DRIVER_ENTRY_H_
