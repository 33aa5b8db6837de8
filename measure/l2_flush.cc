#include "measure/l2_flush.h"

#include <algorithm>

#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "measure/l2_flush_kernel.h"

namespace gpuprof::measure {

int64_t L2FlushBytes(const gpuprof::v1::GpuInfo& gpu) {
  return std::max<int64_t>(2 * gpu.l2_cache_bytes(), int64_t{64} << 20);
}

absl::StatusOr<DeviceReadPass> DeviceReadPass::Create(int64_t bytes) {
  // A multiple of 16 bytes: the read kernel takes 16 at a time.
  ASSIGN_OR_RETURN(DeviceBuffer buffer,
                   DeviceBuffer::Allocate(std::max<int64_t>(16, bytes / 16 * 16)));
  ASSIGN_OR_RETURN(DeviceBuffer sink, DeviceBuffer::Allocate(sizeof(uint32_t)));
  // Zeroed, so the read kernel's XOR is 0 and it never stores.
  CUDA_RETURN_IF_ERROR(cudaMemset(buffer.data(), 0, buffer.bytes()));
  return DeviceReadPass(std::move(buffer), std::move(sink));
}

absl::Status DeviceReadPass::Enqueue(cudaStream_t stream) const {
  CUDA_RETURN_IF_ERROR(LaunchL2ReadFlushKernel(buffer_.data(), buffer_.bytes(),
                                               static_cast<uint32_t*>(sink_.data()), stream));
  return absl::OkStatus();
}

absl::StatusOr<L2Flusher> L2Flusher::Create(const gpuprof::v1::GpuInfo& gpu, L2FlushMode mode) {
  ASSIGN_OR_RETURN(DeviceReadPass pass, DeviceReadPass::Create(L2FlushBytes(gpu)));
  return L2Flusher(std::move(pass), mode);
}

absl::StatusOr<L2Flusher> L2Flusher::ForCurrentDevice(L2FlushMode mode) {
  int device = 0;
  int l2_bytes = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
  gpuprof::v1::GpuInfo gpu;
  gpu.set_l2_cache_bytes(l2_bytes);
  return Create(gpu, mode);
}

absl::Status L2Flusher::Flush(cudaStream_t stream, int64_t sample) const {
  if (mode_ == L2FlushMode::kRead) return pass_.Enqueue(stream);
  CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(pass_.data(), static_cast<int>(sample & 0xff), pass_.bytes(), stream));
  return absl::OkStatus();
}

}  // namespace gpuprof::measure
