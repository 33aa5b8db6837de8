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

// One streaming read of a zeroed device buffer (`l2_flush_kernel`): the L2 flush's read, and on
// its own the time a GPU needs to read that many bytes.
class DeviceReadPass {
 public:
  // Allocates and zeroes `bytes` (rounded down to a multiple of 16, at least 16) on the current
  // device.
  static absl::StatusOr<DeviceReadPass> Create(int64_t bytes);
  // Enqueues the read on `stream`. It stores nothing while the buffer stays zeroed.
  absl::Status Enqueue(cudaStream_t stream) const;
  void* data() const { return buffer_.data(); }
  size_t bytes() const { return buffer_.bytes(); }

 private:
  DeviceReadPass(DeviceBuffer buffer, DeviceBuffer sink)
      : buffer_(std::move(buffer)), sink_(std::move(sink)) {}
  DeviceBuffer buffer_;
  DeviceBuffer sink_;  // what the read kernel would write; it never does
};

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
  // The same, sized from the current device's L2 as the runtime reports it (for callers with
  // no GpuInfo at hand).
  static absl::StatusOr<L2Flusher> ForCurrentDevice(L2FlushMode mode = L2FlushMode::kRead);
  // Enqueues the flush on `stream`; `sample` varies the bytes a kWrite flush writes (which
  // then never reads the buffer).
  absl::Status Flush(cudaStream_t stream, int64_t sample) const;

 private:
  L2Flusher(DeviceReadPass pass, L2FlushMode mode) : pass_(std::move(pass)), mode_(mode) {}
  DeviceReadPass pass_;
  L2FlushMode mode_;
};

}  // namespace gpuprof::measure

#endif  // GPUPROF_MEASURE_L2_FLUSH_H_
