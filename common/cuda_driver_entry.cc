#include "common/cuda_driver_entry.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"

namespace gpuprof {

absl::StatusOr<void*> CudaDriverEntryPoint(const char* symbol) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  CUDA_RETURN_IF_ERROR(
      cudaGetDriverEntryPointByVersion(symbol, &function, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || function == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("the CUDA driver has no ", symbol));
  }
  return function;
}

}  // namespace gpuprof
