#include "common/cuda_raii.h"

#include "common/cuda_status.h"

namespace gpuprof {

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes) {
  void* data = nullptr;
  CUDA_RETURN_IF_ERROR(cudaMalloc(&data, bytes));
  return DeviceBuffer(data, bytes);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::Reset() {
  if (data_ != nullptr) CUDA_LOG_IF_ERROR(cudaFree(data_));
  data_ = nullptr;
  bytes_ = 0;
}

absl::StatusOr<CudaStream> CudaStream::Create(unsigned flags) {
  cudaStream_t stream = nullptr;
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, flags));
  return CudaStream(stream);
}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    Reset();
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

absl::Status CudaStream::Synchronize() const {
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

void CudaStream::Reset() {
  if (stream_ != nullptr) CUDA_LOG_IF_ERROR(cudaStreamDestroy(stream_));
  stream_ = nullptr;
}

absl::StatusOr<CudaEvent> CudaEvent::Create(unsigned flags) {
  cudaEvent_t event = nullptr;
  CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, flags));
  return CudaEvent(event);
}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    Reset();
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

absl::Status CudaEvent::Record(cudaStream_t stream) const {
  CUDA_RETURN_IF_ERROR(cudaEventRecord(event_, stream));
  return absl::OkStatus();
}

void CudaEvent::Reset() {
  if (event_ != nullptr) CUDA_LOG_IF_ERROR(cudaEventDestroy(event_));
  event_ = nullptr;
}

absl::StatusOr<float> ElapsedMilliseconds(const CudaEvent& start, const CudaEvent& stop) {
  float milliseconds = 0;
  CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&milliseconds, start.get(), stop.get()));
  return milliseconds;
}

absl::StatusOr<ScopedCudaDevice> ScopedCudaDevice::Activate(int device) {
  int previous_device = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous_device));
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  return ScopedCudaDevice(previous_device);
}

ScopedCudaDevice::~ScopedCudaDevice() {
  if (previous_device_ >= 0) CUDA_LOG_IF_ERROR(cudaSetDevice(previous_device_));
}

}  // namespace gpuprof
