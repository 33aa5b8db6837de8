#include "common/cupti_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace gpuprof {

absl::StatusCode CuptiResultToStatusCode(CUptiResult result) {
  switch (result) {
    case CUPTI_SUCCESS:
      return absl::StatusCode::kOk;
    case CUPTI_ERROR_OUT_OF_MEMORY:
    case CUPTI_ERROR_MAX_LIMIT_REACHED:
      return absl::StatusCode::kResourceExhausted;
    case CUPTI_ERROR_INVALID_PARAMETER:
    case CUPTI_ERROR_INVALID_DEVICE:
    case CUPTI_ERROR_INVALID_CONTEXT:
    case CUPTI_ERROR_INVALID_EVENT_ID:
    case CUPTI_ERROR_INVALID_EVENT_NAME:
    case CUPTI_ERROR_INVALID_METRIC_ID:
    case CUPTI_ERROR_INVALID_METRIC_NAME:
    case CUPTI_ERROR_INVALID_KIND:
    case CUPTI_ERROR_INVALID_HANDLE:
    case CUPTI_ERROR_INVALID_STREAM:
    case CUPTI_ERROR_INVALID_CHIP_NAME:
    case CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT:
      return absl::StatusCode::kInvalidArgument;
    case CUPTI_ERROR_NOT_INITIALIZED:
    case CUPTI_ERROR_NOT_READY:
    case CUPTI_ERROR_INVALID_OPERATION:
    case CUPTI_ERROR_DISABLED:
    case CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED:
      return absl::StatusCode::kFailedPrecondition;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return absl::StatusCode::kPermissionDenied;
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_NOT_COMPATIBLE:
    case CUPTI_ERROR_API_NOT_IMPLEMENTED:
    case CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
      return absl::StatusCode::kUnimplemented;
    // Another tool (or another subscriber in this process) holds the counters or callbacks.
    case CUPTI_ERROR_HARDWARE_BUSY:
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status CuptiStatus(CUptiResult result, std::string_view what, CallSite location) {
  if (result == CUPTI_SUCCESS) return absl::OkStatus();
  const char* name = nullptr;
  std::string text;
  if (cuptiGetResultString(result, &name) == CUPTI_SUCCESS && name != nullptr) {
    text = name;
  } else {
    text = absl::StrCat("CUptiResult ", static_cast<int>(result));
  }
  // cuptiGetErrorMessage (newer CUPTI) says what the code means; the name alone often does not.
  const char* description = nullptr;
  if (cuptiGetErrorMessage(result, &description) == CUPTI_SUCCESS && description != nullptr &&
      text != description) {
    absl::StrAppend(&text, " (", description, ")");
  }
  return GpuLibraryError(CuptiResultToStatusCode(result), text, what, location);
}

void LogIfCuptiError(CUptiResult result, std::string_view what, CallSite location) {
  if (result == CUPTI_SUCCESS) return;
  LogStatusToStderr(CuptiStatus(result, what, location));
}

}  // namespace gpuprof
