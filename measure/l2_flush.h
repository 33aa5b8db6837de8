// Cold-L2 measurement: a buffer larger than the L2, written before every sample, evicts what
// the previous sample left there.
#ifndef GPUPROF_MEASURE_L2_FLUSH_H_
#define GPUPROF_MEASURE_L2_FLUSH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/cuda_raii.h"
#include "gpuprof/v1/gpus.pb.h"

namespace gpuprof::measure {

// Device memory the flush takes: twice the L2, at least 64 MiB.
int64_t L2FlushBytes(const gpuprof::v1::GpuInfo& gpu);

class L2Flusher {
 public:
  // Allocates on the current device.
  static absl::StatusOr<L2Flusher> Create(const gpuprof::v1::GpuInfo& gpu);
  // Enqueues the flush on `stream`; `sample` varies the bytes written.
  absl::Status Flush(cudaStream_t stream, int64_t sample) const;

 private:
  explicit L2Flusher(DeviceBuffer buffer) : buffer_(std::move(buffer)) {}
  DeviceBuffer buffer_;
};

}  // namespace gpuprof::measure

#endif  // GPUPROF_MEASURE_L2_FLUSH_H_
