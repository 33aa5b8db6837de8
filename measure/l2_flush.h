// Cold-L2 measurement: a buffer larger than the L2, passed through it before every sample,
// evicts what the previous sample left there.
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

enum class L2FlushMode {
  // Reads the buffer: the L2 is left holding clean lines, as Nsight Compute's own cache flush
  // leaves it, and the timed kernel pays only for its own traffic.
  kRead,
  // Writes the buffer (a memset), as nvbench and Triton do: the L2 is left full of dirty
  // lines that the timed kernel's first misses must write back (8-9 us of every sample on an
  // H200; docs/gpu-runs/l2-flush-h200.md). Kept to compare with those tools.
  kWrite,
};

class L2Flusher {
 public:
  // Allocates (and zeroes) the buffer on the current device.
  static absl::StatusOr<L2Flusher> Create(const gpuprof::v1::GpuInfo& gpu,
                                          L2FlushMode mode = L2FlushMode::kRead);
  // Enqueues the flush on `stream`; `sample` varies the bytes a kWrite flush writes.
  absl::Status Flush(cudaStream_t stream, int64_t sample) const;
  L2FlushMode mode() const { return mode_; }

 private:
  L2Flusher(DeviceBuffer buffer, DeviceBuffer sink, L2FlushMode mode)
      : buffer_(std::move(buffer)), sink_(std::move(sink)), mode_(mode) {}
  DeviceBuffer buffer_;
  DeviceBuffer sink_;  // what the read kernel would write; it never does
  L2FlushMode mode_;
};

}  // namespace gpuprof::measure

#endif  // GPUPROF_MEASURE_L2_FLUSH_H_
