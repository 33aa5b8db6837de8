// A blocking kernel on each timed stream, released by the host once a whole sample is queued
// behind it, so that launch latency is not timed (nvbench's approach). One release flag in
// mapped, portable pinned memory serves every stream on every device.
#ifndef GPUPROF_MEASURE_STREAM_BLOCKER_H_
#define GPUPROF_MEASURE_STREAM_BLOCKER_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace gpuprof::measure {

class StreamBlocker {
 public:
  // A blocked stream is released after this long even if the host never does it.
  static constexpr int64_t kTimeoutNs = 5'000'000'000;

  static absl::StatusOr<StreamBlocker> Create();
  StreamBlocker(StreamBlocker&& other) noexcept;
  StreamBlocker& operator=(StreamBlocker&& other) noexcept;
  ~StreamBlocker();

  // Arms the flag (first call of a sample) and enqueues the blocker on `stream`.
  absl::Status Block(cudaStream_t stream);
  // Lets every blocked stream go. Safe to call when nothing is blocked.
  void Release();

 private:
  struct Flag;
  explicit StreamBlocker(std::unique_ptr<Flag> flag);
  std::unique_ptr<Flag> flag_;
};

}  // namespace gpuprof::measure

#endif  // GPUPROF_MEASURE_STREAM_BLOCKER_H_
