#include "common/nvrtc_status.h"

namespace gpuprof {

absl::StatusCode NvrtcResultToStatusCode(nvrtcResult result) {
  switch (result) {
    case NVRTC_SUCCESS:
      return absl::StatusCode::kOk;
    case NVRTC_ERROR_OUT_OF_MEMORY:
    case NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED:
      return absl::StatusCode::kResourceExhausted;
    // The source or the options handed to the compiler are at fault.
    case NVRTC_ERROR_INVALID_INPUT:
    case NVRTC_ERROR_INVALID_PROGRAM:
    case NVRTC_ERROR_INVALID_OPTION:
    case NVRTC_ERROR_COMPILATION:
    case NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID:
      return absl::StatusCode::kInvalidArgument;
    case NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION:
    case NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION:
      return absl::StatusCode::kFailedPrecondition;
    case NVRTC_ERROR_CANCELLED:
      return absl::StatusCode::kCancelled;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status NvrtcStatus(nvrtcResult result, std::string_view what, CallSite location) {
  if (result == NVRTC_SUCCESS) return absl::OkStatus();
  // nvrtcGetErrorString returns the enumerator's name, e.g. "NVRTC_ERROR_COMPILATION".
  return GpuLibraryError(NvrtcResultToStatusCode(result), nvrtcGetErrorString(result), what,
                         location);
}

void LogIfNvrtcError(nvrtcResult result, std::string_view what, CallSite location) {
  if (result == NVRTC_SUCCESS) return;
  LogStatusToStderr(NvrtcStatus(result, what, location));
}

}  // namespace gpuprof
