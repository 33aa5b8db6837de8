// ncclResult_t as absl::Status; see cuda_status.h for the shape of the messages.
#ifndef GPUPROF_COMMON_NCCL_STATUS_H_
#define GPUPROF_COMMON_NCCL_STATUS_H_

#include <nccl.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/call_site.h"
#include "common/cuda_status.h"

namespace gpuprof {

absl::StatusCode NcclResultToStatusCode(ncclResult_t result);

// "ncclInvalidArgument" etc., or "ncclResult_t <n>".
std::string NcclResultName(ncclResult_t result);

// OK for ncclSuccess; otherwise "<what> failed: ncclXxx (<description>; <last error>)
// [file:line]". NCCL's last-error text (ncclGetLastError) names the underlying cause, such as
// the CUDA or socket call that failed, so it is included when present.
absl::Status NcclStatus(ncclResult_t result, std::string_view what,
                        CallSite location = CallSite::Current());

void LogIfNcclError(ncclResult_t result, std::string_view what,
                    CallSite location = CallSite::Current());

}  // namespace gpuprof

#define NCCL_RETURN_IF_ERROR(call) RETURN_IF_ERROR(::gpuprof::NcclStatus((call), #call))
#define NCCL_LOG_IF_ERROR(call) ::gpuprof::LogIfNcclError((call), #call)

#endif  // GPUPROF_COMMON_NCCL_STATUS_H_
