#include "measure/stream_blocker.h"

#include <atomic>

#include "common/cuda_status.h"
#include "measure/stream_blocker_kernel.h"

namespace gpuprof::measure {

struct StreamBlocker::Flag {
  void* host = nullptr;
  void* device = nullptr;

  ~Flag() {
    if (host != nullptr) CUDA_LOG_IF_ERROR(cudaFreeHost(host));
  }
  void Set(int32_t value) {
    std::atomic_ref<int32_t>(*static_cast<int32_t*>(host)).store(value, std::memory_order_seq_cst);
  }
};

absl::StatusOr<StreamBlocker> StreamBlocker::Create() {
  auto flag = std::make_unique<Flag>();
  // Portable: the same pinned page is mapped into every device's address space.
  CUDA_RETURN_IF_ERROR(
      cudaHostAlloc(&flag->host, sizeof(int32_t), cudaHostAllocMapped | cudaHostAllocPortable));
  CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer(&flag->device, flag->host, 0));
  flag->Set(1);
  return StreamBlocker(std::move(flag));
}

StreamBlocker::StreamBlocker(std::unique_ptr<Flag> flag) : flag_(std::move(flag)) {}
StreamBlocker::StreamBlocker(StreamBlocker&& other) noexcept = default;
StreamBlocker& StreamBlocker::operator=(StreamBlocker&& other) noexcept = default;

StreamBlocker::~StreamBlocker() {
  if (flag_ != nullptr) Release();
}

absl::Status StreamBlocker::Block(cudaStream_t stream) {
  flag_->Set(0);
  CUDA_RETURN_IF_ERROR(LaunchStreamBlockerKernel(static_cast<const int32_t*>(flag_->device),
                                                 kTimeoutNs, stream));
  return absl::OkStatus();
}

void StreamBlocker::Release() { flag_->Set(1); }

}  // namespace gpuprof::measure
