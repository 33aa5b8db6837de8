// CUptiResult as absl::Status; see cuda_status.h for the shape of the messages.
#ifndef GPUPROF_COMMON_CUPTI_STATUS_H_
#define GPUPROF_COMMON_CUPTI_STATUS_H_

#include <cupti_result.h>

#include <string_view>

#include "absl/status/status.h"
#include "common/call_site.h"
#include "common/cuda_status.h"

namespace gpuprof {

absl::StatusCode CuptiResultToStatusCode(CUptiResult result);

// OK for CUPTI_SUCCESS; otherwise "<what> failed: CUPTI_ERROR_... (<description>) [file:line]".
absl::Status CuptiStatus(CUptiResult result, std::string_view what,
                         CallSite location = CallSite::Current());

void LogIfCuptiError(CUptiResult result, std::string_view what,
                     CallSite location = CallSite::Current());

}  // namespace gpuprof

#define CUPTI_RETURN_IF_ERROR(call) RETURN_IF_ERROR(::gpuprof::CuptiStatus((call), #call))
#define CUPTI_LOG_IF_ERROR(call) ::gpuprof::LogIfCuptiError((call), #call)

#endif  // GPUPROF_COMMON_CUPTI_STATUS_H_
