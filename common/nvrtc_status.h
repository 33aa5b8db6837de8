// nvrtcResult as absl::Status; see cuda_status.h for the shape of the messages. A compilation
// error's log comes from nvrtcGetProgramLog, which the caller (the JIT cache) adds itself.
#ifndef GPUPROF_COMMON_NVRTC_STATUS_H_
#define GPUPROF_COMMON_NVRTC_STATUS_H_

#include <nvrtc.h>

#include <string_view>

#include "absl/status/status.h"
#include "common/call_site.h"
#include "common/cuda_status.h"

namespace gpuprof {

absl::StatusCode NvrtcResultToStatusCode(nvrtcResult result);

// OK for NVRTC_SUCCESS; otherwise "<what> failed: NVRTC_ERROR_... [file:line]".
absl::Status NvrtcStatus(nvrtcResult result, std::string_view what,
                         CallSite location = CallSite::Current());

void LogIfNvrtcError(nvrtcResult result, std::string_view what,
                     CallSite location = CallSite::Current());

}  // namespace gpuprof

#define NVRTC_RETURN_IF_ERROR(call) RETURN_IF_ERROR(::gpuprof::NvrtcStatus((call), #call))
#define NVRTC_LOG_IF_ERROR(call) ::gpuprof::LogIfNvrtcError((call), #call)

#endif  // GPUPROF_COMMON_NVRTC_STATUS_H_
