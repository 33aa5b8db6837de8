#include "common/cuda_status.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/cupti_status.h"
#include "common/nccl_status.h"
#include "common/nvrtc_status.h"

namespace gpuprof {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

absl::Status FailingCudaCall() {
  CUDA_RETURN_IF_ERROR(cudaErrorInvalidValue);
  return absl::OkStatus();
}

absl::Status SucceedingCudaCall() {
  CUDA_RETURN_IF_ERROR(cudaSuccess);
  return absl::OkStatus();
}

TEST(CudaStatusTest, SuccessIsOk) {
  EXPECT_TRUE(CudaStatus(cudaSuccess, "cudaFree(p)").ok());
  EXPECT_TRUE(CuStatus(CUDA_SUCCESS, "cuInit(0)").ok());
  EXPECT_TRUE(SucceedingCudaCall().ok());
}

TEST(CudaStatusTest, MessageNamesCallCodeAndLocation) {
  const int line = __LINE__ + 1;
  absl::Status status = CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc(&p, n)");
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("cudaMalloc(&p, n) failed"), HasSubstr("cudaErrorMemoryAllocation"),
                    HasSubstr("out of memory"),
                    HasSubstr("common/cuda_status_test.cc:" + std::to_string(line))));
}

TEST(CudaStatusTest, MacroStringifiesTheCall) {
  absl::Status status = FailingCudaCall();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("cudaErrorInvalidValue failed"), HasSubstr("cuda_status_test.cc:")));
}

TEST(CudaStatusTest, MapsCodes) {
  EXPECT_EQ(CudaErrorToStatusCode(cudaErrorMemoryAllocation), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CudaErrorToStatusCode(cudaErrorNoDevice), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaErrorToStatusCode(cudaErrorInsufficientDriver),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaErrorToStatusCode(cudaErrorInvalidValue), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaErrorToStatusCode(cudaErrorIllegalAddress), absl::StatusCode::kInternal);
  EXPECT_EQ(CudaErrorToStatusCode(cudaErrorUnknown), absl::StatusCode::kInternal);
  EXPECT_EQ(CuResultToStatusCode(CUDA_ERROR_OUT_OF_MEMORY), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CuResultToStatusCode(CUDA_ERROR_NO_DEVICE), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CuResultToStatusCode(CUDA_ERROR_INVALID_VALUE), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CuResultToStatusCode(CUDA_ERROR_LAUNCH_FAILED), absl::StatusCode::kInternal);
}

TEST(CudaStatusTest, StickyErrors) {
  for (cudaError_t error : {cudaErrorIllegalAddress, cudaErrorLaunchFailure,
                            cudaErrorMisalignedAddress, cudaErrorHardwareStackError,
                            cudaErrorIllegalInstruction, cudaErrorInvalidPc, cudaErrorAssert}) {
    EXPECT_TRUE(IsStickyCudaError(error)) << cudaGetErrorName(error);
  }
  for (cudaError_t error : {cudaSuccess, cudaErrorInvalidValue, cudaErrorMemoryAllocation,
                            cudaErrorNotReady, cudaErrorNoDevice}) {
    EXPECT_FALSE(IsStickyCudaError(error)) << cudaGetErrorName(error);
  }
  EXPECT_TRUE(IsStickyCuResult(CUDA_ERROR_ILLEGAL_ADDRESS));
  EXPECT_FALSE(IsStickyCuResult(CUDA_ERROR_OUT_OF_MEMORY));
}

TEST(CudaStatusTest, StickinessSurvivesInTheStatus) {
  absl::Status sticky = CudaStatus(cudaErrorIllegalAddress, "cudaStreamSynchronize(s)");
  EXPECT_TRUE(IsStickyCudaError(sticky));
  EXPECT_EQ(CudaErrorFromStatus(sticky), cudaErrorIllegalAddress);
  EXPECT_THAT(sticky.message(), HasSubstr("context is unusable"));

  absl::Status plain = CudaStatus(cudaErrorInvalidValue, "cudaMemcpy(...)");
  EXPECT_FALSE(IsStickyCudaError(plain));
  EXPECT_THAT(plain.message(), Not(HasSubstr("unusable")));

  EXPECT_TRUE(IsStickyCudaError(CuStatus(CUDA_ERROR_LAUNCH_FAILED, "cuLaunchKernel(...)")));
  EXPECT_EQ(CuResultFromStatus(CuStatus(CUDA_ERROR_LAUNCH_FAILED, "x")), CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_FALSE(IsStickyCudaError(absl::InternalError("not from CUDA")));
  EXPECT_EQ(CudaErrorFromStatus(absl::OkStatus()), std::nullopt);
}

TEST(CudaStatusTest, CuResultNamesWithoutLibcuda) {
  EXPECT_EQ(CuResultName(CUDA_ERROR_OUT_OF_MEMORY), "CUDA_ERROR_OUT_OF_MEMORY");
  absl::Status status = CuStatus(CUDA_ERROR_NOT_INITIALIZED, "cuCtxGetCurrent(&ctx)");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("cuCtxGetCurrent(&ctx) failed"),
                                      HasSubstr("CUDA_ERROR_NOT_INITIALIZED")));
  // A code outside the table still shows its number (or the driver's name when loaded). The
  // code stays within the enum's range (0-1023): a value beyond it is undefined behaviour.
  EXPECT_THAT(CuStatus(static_cast<CUresult>(1000), "x").message(), HasSubstr("1000"));
}

TEST(CudaStatusTest, LogIfErrorDoesNotThrow) {
  testing::internal::CaptureStderr();
  LogIfCudaError(cudaSuccess, "cudaFree(p)");
  CUDA_LOG_IF_ERROR(cudaErrorInvalidDevicePointer);
  LogIfCuError(CUDA_ERROR_INVALID_CONTEXT, "cuCtxDestroy(ctx)");
  std::string logged = testing::internal::GetCapturedStderr();
  EXPECT_THAT(logged, AllOf(HasSubstr("cudaErrorInvalidDevicePointer failed"),
                            HasSubstr("cuCtxDestroy(ctx) failed"), Not(HasSubstr("cudaFree")),
                            Not(HasSubstr("type.gpuprof"))));
}

TEST(CuptiStatusTest, Converts) {
  EXPECT_TRUE(CuptiStatus(CUPTI_SUCCESS, "cuptiActivityFlushAll(0)").ok());
  absl::Status status = CuptiStatus(CUPTI_ERROR_INVALID_PARAMETER, "cuptiSubscribe(&s, cb, p)");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("cuptiSubscribe(&s, cb, p) failed"),
                                      HasSubstr("CUPTI_ERROR_INVALID_PARAMETER")));
  EXPECT_EQ(CuptiResultToStatusCode(CUPTI_ERROR_OUT_OF_MEMORY),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CuptiResultToStatusCode(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CuptiResultToStatusCode(CUPTI_ERROR_NOT_INITIALIZED),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CuptiResultToStatusCode(CUPTI_ERROR_UNKNOWN), absl::StatusCode::kInternal);
}

TEST(NcclStatusTest, Converts) {
  EXPECT_TRUE(NcclStatus(ncclSuccess, "ncclGroupEnd()").ok());
  absl::Status status = NcclStatus(ncclInvalidArgument, "ncclAllReduce(...)");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("ncclAllReduce(...) failed"), HasSubstr("ncclInvalidArgument"),
                    HasSubstr(ncclGetErrorString(ncclInvalidArgument))));
  EXPECT_EQ(NcclResultToStatusCode(ncclUnhandledCudaError), absl::StatusCode::kInternal);
  EXPECT_EQ(NcclResultToStatusCode(ncclRemoteError), absl::StatusCode::kUnavailable);
  // Unnamed, within the enum's range (0-15).
  EXPECT_EQ(NcclResultName(static_cast<ncclResult_t>(15)), "ncclResult_t 15");
}

TEST(NvrtcStatusTest, Converts) {
  EXPECT_TRUE(NvrtcStatus(NVRTC_SUCCESS, "nvrtcCompileProgram(p, 0, nullptr)").ok());
  absl::Status status = NvrtcStatus(NVRTC_ERROR_COMPILATION, "nvrtcCompileProgram(p, 2, opts)");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("nvrtcCompileProgram(p, 2, opts) failed"),
                                      HasSubstr("NVRTC_ERROR_COMPILATION")));
  EXPECT_EQ(NvrtcResultToStatusCode(NVRTC_ERROR_OUT_OF_MEMORY),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(NvrtcResultToStatusCode(NVRTC_ERROR_INTERNAL_ERROR), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace gpuprof
