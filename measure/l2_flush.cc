#include "measure/l2_flush.h"

#include <algorithm>

#include "common/cuda_status.h"
#include "common/status_macros.h"

namespace gpuprof::measure {

int64_t L2FlushBytes(const gpuprof::v1::GpuInfo& gpu) {
  return std::max<int64_t>(2 * gpu.l2_cache_bytes(), int64_t{64} << 20);
}

absl::StatusOr<L2Flusher> L2Flusher::Create(const gpuprof::v1::GpuInfo& gpu) {
  ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Allocate(L2FlushBytes(gpu)));
  return L2Flusher(std::move(buffer));
}

absl::Status L2Flusher::Flush(cudaStream_t stream, int64_t sample) const {
  CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(buffer_.data(), static_cast<int>(sample & 0xff), buffer_.bytes(), stream));
  return absl::OkStatus();
}

}  // namespace gpuprof::measure
