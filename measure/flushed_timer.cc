#include "measure/flushed_timer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"

namespace gpuprof::measure {
namespace {

// Samples queued behind one release of the blocker: enough that the host's per-batch
// synchronisation is rare, few enough that the launch queue (about a thousand entries) never
// fills while the stream is held.
constexpr int kSamplesPerRelease = 16;

}  // namespace

absl::StatusOr<FlushedTimer> FlushedTimer::Create(const FlushedTimerOptions& options) {
  if (options.max_samples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_samples: got ", options.max_samples, "; must be >= 1"));
  }
  std::optional<L2Flusher> flush;
  absl::StatusOr<L2Flusher> flusher = L2Flusher::ForCurrentDevice(options.flush_mode);
  if (flusher.ok()) {
    // One flush outside any blocker, so that its kernel is loaded: with lazy module loading
    // the first launch of a kernel waits for the device, which a held stream keeps busy until
    // the blocker times out (seconds).
    RETURN_IF_ERROR(flusher->Flush(/*stream=*/nullptr, 0));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(nullptr));
    flush.emplace(std::move(*flusher));
  } else if (options.require_flush) {
    return flusher.status();
  } else {
    cudaGetLastError();  // the failed allocation's error is not the caller's
  }
  ASSIGN_OR_RETURN(StreamBlocker blocker, StreamBlocker::Create());
  std::vector<CudaEvent> events;
  for (int i = 0; i < 2 * options.max_samples; ++i) {
    ASSIGN_OR_RETURN(CudaEvent event, CudaEvent::Create());
    events.push_back(std::move(event));
  }
  return FlushedTimer(std::move(flush), std::move(blocker), std::move(events));
}

absl::StatusOr<SampleSummary> FlushedTimer::Time(cudaStream_t stream,
                                                 const std::function<absl::Status()>& launch,
                                                 int warmup, int samples) {
  samples = std::clamp(samples, 1, static_cast<int>(events_.size() / 2));
  // At least one launch before the blocker, for the same reason as the flush's in Create.
  for (int i = 0; i < std::max(warmup, 1); ++i) RETURN_IF_ERROR(launch());
  for (int first = 0; first < samples; first += kSamplesPerRelease) {
    const int last = std::min(samples, first + kSamplesPerRelease);
    RETURN_IF_ERROR(blocker_.Block(stream));
    absl::Status queued = absl::OkStatus();
    for (int i = first; i < last && queued.ok(); ++i) {
      if (flush_.has_value()) queued = flush_->Flush(stream, i);
      if (queued.ok()) queued = events_[2 * i].Record(stream);
      if (queued.ok()) queued = launch();
      if (queued.ok()) queued = events_[2 * i + 1].Record(stream);
    }
    blocker_.Release();  // never leave the stream held, whatever failed
    RETURN_IF_ERROR(queued);
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  }
  std::vector<double> us;
  us.reserve(samples);
  for (int i = 0; i < samples; ++i) {
    ASSIGN_OR_RETURN(const float ms, ElapsedMilliseconds(events_[2 * i], events_[2 * i + 1]));
    us.push_back(ms * 1e3);
  }
  return Summarize(std::move(us));
}

}  // namespace gpuprof::measure
