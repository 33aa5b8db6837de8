#include "common/nccl_status.h"

#include "absl/strings/str_cat.h"

namespace gpuprof {

absl::StatusCode NcclResultToStatusCode(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return absl::StatusCode::kOk;
    case ncclInvalidArgument:
      return absl::StatusCode::kInvalidArgument;
    case ncclInvalidUsage:
      return absl::StatusCode::kFailedPrecondition;
    // A peer died or the network failed: retrying with a new communicator may work.
    case ncclRemoteError:
    case ncclSystemError:
      return absl::StatusCode::kUnavailable;
    // A non-blocking communicator has not finished the operation yet.
    case ncclInProgress:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

std::string NcclResultName(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "ncclSuccess";
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return absl::StrCat("ncclResult_t ", static_cast<int>(result));
  }
}

absl::Status NcclStatus(ncclResult_t result, std::string_view what, CallSite location) {
  if (result == ncclSuccess) return absl::OkStatus();
  std::string text = absl::StrCat(NcclResultName(result), " (", ncclGetErrorString(result));
  // The argument is unused by NCCL today; the last error is per process.
  const char* last_error = ncclGetLastError(nullptr);
  if (last_error != nullptr && last_error[0] != '\0') absl::StrAppend(&text, "; ", last_error);
  absl::StrAppend(&text, ")");
  return GpuLibraryError(NcclResultToStatusCode(result), text, what, location);
}

void LogIfNcclError(ncclResult_t result, std::string_view what, CallSite location) {
  if (result == ncclSuccess) return;
  LogStatusToStderr(NcclStatus(result, what, location));
}

}  // namespace gpuprof
