#include "common/cuda_status.h"

#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gpuprof {
namespace {

// Payload type URLs under which CudaStatus / CuStatus keep the numeric code.
constexpr char kCudaErrorPayloadUrl[] = "type.gpuprof/cuda_error";
constexpr char kCuResultPayloadUrl[] = "type.gpuprof/cu_result";

// Debian's abseil has its own string_view type, not an alias of std::string_view.
absl::string_view AsAbsl(std::string_view text) { return {text.data(), text.size()}; }

std::optional<int> IntPayload(const absl::Status& status, const char* type_url) {
  // absl::optional, not std::optional, in Debian's abseil.
  auto payload = status.GetPayload(type_url);
  int value = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &value)) {
    return std::nullopt;
  }
  return value;
}

// cuGetErrorName / cuGetErrorString, only when libcuda is already in the process: a CUresult
// other than from a table entry can only come from a loaded driver, and loading libcuda here
// would start the driver as a side effect of formatting an error.
std::string DriverErrorText(CUresult result, bool want_name) {
  void* libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (libcuda == nullptr) return "";
  using ErrorTextFn = CUresult (*)(CUresult, const char**);
  auto fn = reinterpret_cast<ErrorTextFn>(
      dlsym(libcuda, want_name ? "cuGetErrorName" : "cuGetErrorString"));
  const char* text = nullptr;
  std::string out;
  if (fn != nullptr && fn(result, &text) == CUDA_SUCCESS && text != nullptr) out = text;
  dlclose(libcuda);
  return out;
}

}  // namespace

absl::Status GpuLibraryError(absl::StatusCode code, std::string_view error_text,
                             std::string_view what, CallSite location) {
  return absl::Status(code, absl::StrCat(AsAbsl(what), " failed: ", AsAbsl(error_text), " [",
                                         location.file_name(), ":", location.line(), "]"));
}

absl::StatusCode CudaErrorToStatusCode(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return absl::StatusCode::kOk;
    case cudaErrorMemoryAllocation:
    case cudaErrorLaunchOutOfResources:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorStubLibrary:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorSystemNotReady:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorInitializationError:
    case cudaErrorNoKernelImageForDevice:
      return absl::StatusCode::kFailedPrecondition;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidPitchValue:
    case cudaErrorInvalidSymbol:
    case cudaErrorInvalidHostPointer:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection:
    case cudaErrorInvalidDeviceFunction:
    case cudaErrorInvalidResourceHandle:
      return absl::StatusCode::kInvalidArgument;
    case cudaErrorDevicesUnavailable:
      return absl::StatusCode::kUnavailable;
    case cudaErrorNotSupported:
      return absl::StatusCode::kUnimplemented;
    case cudaErrorNotPermitted:
      return absl::StatusCode::kPermissionDenied;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::StatusCode CuResultToStatusCode(CUresult result) {
  switch (result) {
    case CUDA_SUCCESS:
      return absl::StatusCode::kOk;
    case CUDA_ERROR_OUT_OF_MEMORY:
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
      return absl::StatusCode::kResourceExhausted;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_SYSTEM_NOT_READY:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
      return absl::StatusCode::kFailedPrecondition;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_PTX:
      return absl::StatusCode::kInvalidArgument;
    case CUDA_ERROR_NOT_FOUND:
      return absl::StatusCode::kNotFound;
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
      return absl::StatusCode::kUnavailable;
    case CUDA_ERROR_NOT_SUPPORTED:
      return absl::StatusCode::kUnimplemented;
    case CUDA_ERROR_NOT_PERMITTED:
      return absl::StatusCode::kPermissionDenied;
    default:
      return absl::StatusCode::kInternal;
  }
}

bool IsStickyCudaError(cudaError_t error) {
  switch (error) {
    // The header documents these as leaving the process in an inconsistent state.
    case cudaErrorContained:
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorMpsClientTerminated:
    case cudaErrorExternalDevice:
    // Uncorrectable hardware errors: the context's memory can no longer be trusted.
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
      return true;
    default:
      return false;
  }
}

bool IsStickyCuResult(CUresult result) {
  switch (result) {
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case CUDA_ERROR_MPS_CLIENT_TERMINATED:
    case CUDA_ERROR_EXTERNAL_DEVICE:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:
      return true;
    default:
      return false;
  }
}

absl::Status CudaStatus(cudaError_t error, std::string_view what, CallSite location) {
  if (error == cudaSuccess) return absl::OkStatus();
  // cudaGetErrorName/String are pure lookups in cudart: they work without a driver.
  std::string text = absl::StrCat(cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
  if (IsStickyCudaError(error)) absl::StrAppend(&text, "; the CUDA context is unusable");
  absl::Status status = GpuLibraryError(CudaErrorToStatusCode(error), text, what, location);
  status.SetPayload(kCudaErrorPayloadUrl, absl::Cord(absl::StrCat(static_cast<int>(error))));
  return status;
}

std::string CuResultName(CUresult result) {
  switch (result) {
#define GPUPROF_CU_RESULT_NAME(code) \
  case code:                         \
    return #code;
    GPUPROF_CU_RESULT_NAME(CUDA_SUCCESS)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_INVALID_VALUE)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_OUT_OF_MEMORY)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_NOT_INITIALIZED)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_DEINITIALIZED)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_STUB_LIBRARY)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_NO_DEVICE)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_INVALID_DEVICE)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_INVALID_IMAGE)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_INVALID_CONTEXT)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_NO_BINARY_FOR_GPU)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_ECC_UNCORRECTABLE)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_INVALID_PTX)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_NVLINK_UNCORRECTABLE)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_INVALID_HANDLE)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_NOT_FOUND)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_NOT_READY)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_ILLEGAL_ADDRESS)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_LAUNCH_TIMEOUT)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_ASSERT)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_HARDWARE_STACK_ERROR)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_ILLEGAL_INSTRUCTION)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_MISALIGNED_ADDRESS)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_INVALID_PC)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_LAUNCH_FAILED)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_NOT_PERMITTED)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_NOT_SUPPORTED)
    GPUPROF_CU_RESULT_NAME(CUDA_ERROR_UNKNOWN)
#undef GPUPROF_CU_RESULT_NAME
    default:
      break;
  }
  std::string name = DriverErrorText(result, /*want_name=*/true);
  if (!name.empty()) return name;
  return absl::StrCat("CUresult ", static_cast<int>(result));
}

absl::Status CuStatus(CUresult result, std::string_view what, CallSite location) {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  std::string text = CuResultName(result);
  if (std::string description = DriverErrorText(result, /*want_name=*/false);
      !description.empty()) {
    absl::StrAppend(&text, " (", description, ")");
  }
  if (IsStickyCuResult(result)) absl::StrAppend(&text, "; the CUDA context is unusable");
  absl::Status status = GpuLibraryError(CuResultToStatusCode(result), text, what, location);
  status.SetPayload(kCuResultPayloadUrl, absl::Cord(absl::StrCat(static_cast<int>(result))));
  return status;
}

std::optional<cudaError_t> CudaErrorFromStatus(const absl::Status& status) {
  std::optional<int> code = IntPayload(status, kCudaErrorPayloadUrl);
  if (!code.has_value()) return std::nullopt;
  return static_cast<cudaError_t>(*code);
}

std::optional<CUresult> CuResultFromStatus(const absl::Status& status) {
  std::optional<int> code = IntPayload(status, kCuResultPayloadUrl);
  if (!code.has_value()) return std::nullopt;
  return static_cast<CUresult>(*code);
}

bool IsStickyCudaError(const absl::Status& status) {
  if (std::optional<cudaError_t> error = CudaErrorFromStatus(status); error.has_value()) {
    return IsStickyCudaError(*error);
  }
  if (std::optional<CUresult> result = CuResultFromStatus(status); result.has_value()) {
    return IsStickyCuResult(*result);
  }
  return false;
}

void LogStatusToStderr(const absl::Status& status) {
  if (status.ok()) return;
  // Called from destructors: an allocation failure while formatting must not escape.
  try {
    std::string line = absl::StrCat(
        "gpuprof: ", status.ToString(absl::StatusToStringMode::kWithNoExtraData), "\n");
    std::fputs(line.c_str(), stderr);
  } catch (...) {
    std::fputs("gpuprof: a GPU library call failed (message lost)\n", stderr);
  }
}

void LogIfCudaError(cudaError_t error, std::string_view what, CallSite location) {
  if (error == cudaSuccess) return;
  LogStatusToStderr(CudaStatus(error, what, location));
}

void LogIfCuError(CUresult result, std::string_view what, CallSite location) {
  if (result == CUDA_SUCCESS) return;
  LogStatusToStderr(CuStatus(result, what, location));
}

}  // namespace gpuprof
