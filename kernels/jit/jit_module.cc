#include "kernels/jit/jit_module.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"

namespace gpuprof::kernels {

absl::StatusOr<JitKernel> JitKernel::Load(const JitBinary& binary) {
  cudaLibrary_t library = nullptr;
  CUDA_RETURN_IF_ERROR(
      cudaLibraryLoadData(&library, binary.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  cudaKernel_t kernel = nullptr;
  const cudaError_t found = cudaLibraryGetKernel(&kernel, library, binary.lowered_name.c_str());
  if (found != cudaSuccess) {
    CUDA_LOG_IF_ERROR(cudaLibraryUnload(library));
    return CudaStatus(found, absl::StrCat("cudaLibraryGetKernel(", binary.lowered_name, ")"));
  }
  return JitKernel(library, kernel);
}

JitKernel& JitKernel::operator=(JitKernel&& other) noexcept {
  if (this != &other) {
    Reset();
    library_ = std::exchange(other.library_, nullptr);
    kernel_ = std::exchange(other.kernel_, nullptr);
  }
  return *this;
}

void JitKernel::Reset() {
  if (library_ != nullptr) CUDA_LOG_IF_ERROR(cudaLibraryUnload(library_));
  library_ = nullptr;
  kernel_ = nullptr;
}

absl::Status JitKernel::Launch(int64_t blocks, int threads, const void* params,
                               bool programmatic_dependent_launch, cudaStream_t stream,
                               int64_t dynamic_shared_bytes) const {
  if (kernel_ == nullptr) return absl::FailedPreconditionError("launch of an unloaded kernel");
  if (blocks < 1 || blocks > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("launch of ", blocks, " blocks; must be in [1, 2^31 - 1]"));
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.stream = stream;
  config.dynamicSmemBytes = static_cast<size_t>(dynamic_shared_bytes);
  cudaLaunchAttribute attribute = {};
  if (programmatic_dependent_launch) {
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  void* arguments[] = {const_cast<void*>(params)};
  CUDA_RETURN_IF_ERROR(
      cudaLaunchKernelExC(&config, reinterpret_cast<const void*>(kernel_), arguments));
  return absl::OkStatus();
}

absl::StatusOr<KernelAttributes> JitKernel::Attributes() const {
  cudaFuncAttributes attributes = {};
  const cudaError_t error =
      cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel_));
  if (error != cudaSuccess) {
    // Not sticky; clear it so that a later launch check does not report it.
    cudaGetLastError();
    return CudaStatus(error, "cudaFuncGetAttributes");
  }
  return KernelAttributes{
      .registers_per_thread = attributes.numRegs,
      .max_threads_per_block = attributes.maxThreadsPerBlock,
      .local_bytes_per_thread = static_cast<int64_t>(attributes.localSizeBytes),
      .static_shared_bytes = static_cast<int64_t>(attributes.sharedSizeBytes)};
}

absl::Status JitKernel::AllowDynamicSharedBytes(int64_t bytes) const {
  if (kernel_ == nullptr) return absl::FailedPreconditionError("attribute of an unloaded kernel");
  CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel_),
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(bytes)));
  return absl::OkStatus();
}

absl::StatusOr<int> JitKernel::MaxActiveBlocksPerMultiprocessor(
    int threads, int64_t dynamic_shared_bytes) const {
  if (kernel_ == nullptr) return absl::FailedPreconditionError("occupancy of an unloaded kernel");
  int blocks = 0;
  const cudaError_t error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, reinterpret_cast<const void*>(kernel_), threads,
      static_cast<size_t>(dynamic_shared_bytes));
  if (error != cudaSuccess) {
    cudaGetLastError();  // not sticky; a later launch check must not report it
    return CudaStatus(error, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  }
  return blocks;
}

}  // namespace gpuprof::kernels
