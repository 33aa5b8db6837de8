// CUDA runtime and driver error codes as absl::Status, with the failing call's text and the
// caller's file:line. CUPTI, NCCL and NVRTC have their own headers (cupti_status.h,
// nccl_status.h, nvrtc_status.h) so that a target links only the libraries it uses.
//
//   CUDA_RETURN_IF_ERROR(cudaMalloc(&ptr, bytes));
//   ~Buffer() { CUDA_LOG_IF_ERROR(cudaFree(ptr_)); }
#ifndef GPUPROF_COMMON_CUDA_STATUS_H_
#define GPUPROF_COMMON_CUDA_STATUS_H_

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/call_site.h"
#include "common/status_macros.h"

namespace gpuprof {

// Builds "<what> failed: <error_text> [<file>:<line>]" with `code`. Shared by every GPU
// library's converter so that their messages read alike.
absl::Status GpuLibraryError(absl::StatusCode code, std::string_view error_text,
                             std::string_view what, CallSite location);

// cudaErrorMemoryAllocation -> RESOURCE_EXHAUSTED, no device / driver -> FAILED_PRECONDITION,
// bad arguments -> INVALID_ARGUMENT, anything else -> INTERNAL.
absl::StatusCode CudaErrorToStatusCode(cudaError_t error);
absl::StatusCode CuResultToStatusCode(CUresult result);

// OK for cudaSuccess; otherwise an error naming the code, e.g. "cudaMalloc(&p, n) failed:
// cudaErrorMemoryAllocation (out of memory) [kernels/store.cc:42]". The cudaError_t travels
// in the status as a payload, so CudaErrorFromStatus can recover it further up.
absl::Status CudaStatus(cudaError_t error, std::string_view what,
                        CallSite location = CallSite::Current());

// The driver API's CUresult. libcuda is never linked (machines without a GPU lack it), so the
// name comes from a table of common codes, or from cuGetErrorName when the process has already
// loaded libcuda; otherwise only the number is shown.
absl::Status CuStatus(CUresult result, std::string_view what,
                      CallSite location = CallSite::Current());

// Name of a CUresult such as "CUDA_ERROR_OUT_OF_MEMORY", or "CUresult 12345" when unknown.
std::string CuResultName(CUresult result);

// Errors after which the process's CUDA context is unusable: every later call fails the same
// way until the process exits (illegal address, launch failure, ...). A worker that sees one
// must not be reused.
bool IsStickyCudaError(cudaError_t error);
bool IsStickyCuResult(CUresult result);

// The code carried by a status made by CudaStatus / CuStatus, if any.
std::optional<cudaError_t> CudaErrorFromStatus(const absl::Status& status);
std::optional<CUresult> CuResultFromStatus(const absl::Status& status);

// True when `status` came from a sticky CUDA runtime or driver error, so that code far from the
// failing call can tell that the context is ruined.
bool IsStickyCudaError(const absl::Status& status);

// For destructors and other places that cannot return a status: writes the error to stderr.
void LogIfCudaError(cudaError_t error, std::string_view what,
                    CallSite location = CallSite::Current());
void LogIfCuError(CUresult result, std::string_view what,
                  CallSite location = CallSite::Current());

// Writes a non-OK status to stderr, one line, prefixed "gpuprof: ". Never throws.
void LogStatusToStderr(const absl::Status& status);

}  // namespace gpuprof

// Returns the status of a failed CUDA runtime call from the enclosing function.
#define CUDA_RETURN_IF_ERROR(call) RETURN_IF_ERROR(::gpuprof::CudaStatus((call), #call))
// The same for a CUDA driver API call (CUresult).
#define CU_RETURN_IF_ERROR(call) RETURN_IF_ERROR(::gpuprof::CuStatus((call), #call))
// Logs a failed call; for destructors.
#define CUDA_LOG_IF_ERROR(call) ::gpuprof::LogIfCudaError((call), #call)
#define CU_LOG_IF_ERROR(call) ::gpuprof::LogIfCuError((call), #call)

#endif  // GPUPROF_COMMON_CUDA_STATUS_H_
