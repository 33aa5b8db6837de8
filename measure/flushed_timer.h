// Times launches on one stream the way a cold-L2 sample is timed: each launch after an L2
// flush and between its own pair of events, a batch of them queued behind a StreamBlocker so
// that the host's launch work is never on the clock. For tools that compare many candidates
// quickly (the decode tuner, the attention benchmark); the daemon's measurements use the
// timing loop, which adds stop criteria, graphs and several streams.
#ifndef GPUPROF_MEASURE_FLUSHED_TIMER_H_
#define GPUPROF_MEASURE_FLUSHED_TIMER_H_

#include <cuda_runtime_api.h>

#include <functional>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cuda_raii.h"
#include "common/statistics.h"
#include "measure/l2_flush.h"
#include "measure/stream_blocker.h"

namespace gpuprof::measure {

struct FlushedTimerOptions {
  L2FlushMode flush_mode = L2FlushMode::kRead;
  // When the flush's buffer cannot be allocated (the timed problem may hold most of the GPU):
  // fail (true), or time with a warm L2 (false; l2_flushed() says so).
  bool require_flush = true;
  int max_samples = 100;
};

class FlushedTimer {
 public:
  // On the current device: the flush sized from its L2, the blocker and the events.
  static absl::StatusOr<FlushedTimer> Create(const FlushedTimerOptions& options = {});

  // Runs `launch` (which enqueues on `stream`) `warmup` times untimed (at least once, so that
  // its kernels are loaded before the stream is held), then `samples` times (at most
  // max_samples) each after a flush, and summarises the per-launch times in microseconds.
  absl::StatusOr<SampleSummary> Time(cudaStream_t stream,
                                     const std::function<absl::Status()>& launch, int warmup,
                                     int samples);

  bool l2_flushed() const { return flush_.has_value(); }

 private:
  FlushedTimer(std::optional<L2Flusher> flush, StreamBlocker blocker, std::vector<CudaEvent> events)
      : flush_(std::move(flush)), blocker_(std::move(blocker)), events_(std::move(events)) {}

  std::optional<L2Flusher> flush_;
  StreamBlocker blocker_;
  std::vector<CudaEvent> events_;  // a start and a stop per sample
};

}  // namespace gpuprof::measure

#endif  // GPUPROF_MEASURE_FLUSHED_TIMER_H_
