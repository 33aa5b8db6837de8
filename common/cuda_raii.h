// Move-only owners of CUDA runtime objects: device memory, streams, events, and the current
// device. Creation returns a status; destruction never throws and logs a failure to stderr.
// An owner belongs to the device that was current when it was created; destroy it while the
// process can still use that device (declare a ScopedCudaDevice before the owners it covers,
// so that it is destroyed after them).
#ifndef GPUPROF_COMMON_CUDA_RAII_H_
#define GPUPROF_COMMON_CUDA_RAII_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpuprof {

// cudaMalloc'ed memory on the current device.
class DeviceBuffer {
 public:
  static absl::StatusOr<DeviceBuffer> Allocate(size_t bytes);

  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Reset(); }

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

  // Frees the memory now.
  void Reset();

 private:
  DeviceBuffer(void* data, size_t bytes) : data_(data), bytes_(bytes) {}

  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// A stream on the current device; non-blocking by default so that it never waits on the
// legacy default stream.
class CudaStream {
 public:
  static absl::StatusOr<CudaStream> Create(unsigned flags = cudaStreamNonBlocking);

  CudaStream() = default;
  CudaStream(CudaStream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  ~CudaStream() { Reset(); }

  cudaStream_t get() const { return stream_; }
  absl::Status Synchronize() const;
  void Reset();

 private:
  explicit CudaStream(cudaStream_t stream) : stream_(stream) {}

  cudaStream_t stream_ = nullptr;
};

// An event on the current device; timing-capable by default.
class CudaEvent {
 public:
  static absl::StatusOr<CudaEvent> Create(unsigned flags = cudaEventDefault);

  CudaEvent() = default;
  CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  ~CudaEvent() { Reset(); }

  cudaEvent_t get() const { return event_; }
  absl::Status Record(cudaStream_t stream) const;
  void Reset();

 private:
  explicit CudaEvent(cudaEvent_t event) : event_(event) {}

  cudaEvent_t event_ = nullptr;
};

// GPU time between two recorded, completed events.
absl::StatusOr<float> ElapsedMilliseconds(const CudaEvent& start, const CudaEvent& stop);

// Makes `device` current and restores the previously current device on destruction.
class ScopedCudaDevice {
 public:
  static absl::StatusOr<ScopedCudaDevice> Activate(int device);

  ScopedCudaDevice(ScopedCudaDevice&& other) noexcept
      : previous_device_(std::exchange(other.previous_device_, -1)) {}
  ScopedCudaDevice& operator=(ScopedCudaDevice&&) = delete;
  ScopedCudaDevice(const ScopedCudaDevice&) = delete;
  ScopedCudaDevice& operator=(const ScopedCudaDevice&) = delete;
  ~ScopedCudaDevice();

 private:
  explicit ScopedCudaDevice(int previous_device) : previous_device_(previous_device) {}

  int previous_device_ = -1;  // -1: nothing to restore (moved from)
};

}  // namespace gpuprof

#endif  // GPUPROF_COMMON_CUDA_RAII_H_
