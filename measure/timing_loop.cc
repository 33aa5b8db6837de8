#include "measure/timing_loop.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/statistics.h"
#include "common/status_macros.h"
#include "measure/l2_flush.h"
#include "measure/stop_criteria.h"
#include "measure/stream_blocker.h"
#include "measure/throttling.h"

namespace gpuprof::measure {
namespace {

namespace api = ::gpuprof::v1;
using Clock = std::chrono::steady_clock;

constexpr auto kProgressInterval = std::chrono::milliseconds(250);

// Owners of a captured graph and its executable form.
class CudaGraph {
 public:
  CudaGraph() = default;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph() {
    if (exec_ != nullptr) CUDA_LOG_IF_ERROR(cudaGraphExecDestroy(exec_));
    if (graph_ != nullptr) CUDA_LOG_IF_ERROR(cudaGraphDestroy(graph_));
  }

  // Captures `launches` units of `launch` on `stream`.
  absl::Status Capture(const LaunchFunction& launch, int launches, cudaStream_t stream) {
    CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    absl::Status launched = absl::OkStatus();
    for (int i = 0; i < launches && launched.ok(); ++i) launched = launch(stream);
    // End the capture whatever happened, so the stream is usable (or its error reported).
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph_);
    RETURN_IF_ERROR(launched);
    CUDA_RETURN_IF_ERROR(ended);
    CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&exec_, graph_, 0));
    return absl::OkStatus();
  }

  absl::Status Launch(cudaStream_t stream) const {
    CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec_, stream));
    return absl::OkStatus();
  }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// Everything one timed stream needs, created on its device before the loop starts.
struct StreamTimer {
  const TimedStream* timed = nullptr;
  CudaEvent start;
  CudaEvent stop;
  std::unique_ptr<CudaGraph> graph;
  std::optional<L2Flusher> flush;
};

absl::StatusOr<std::vector<StreamTimer>> PrepareStreams(const MeasurementSetup& setup,
                                                        absl::Span<const TimedStream> streams) {
  const api::MeasurementOptions& options = setup.options;
  const bool cold = options.l2_mode() == api::MeasurementOptions::L2_MODE_COLD;
  std::vector<StreamTimer> timers;
  for (const TimedStream& timed : streams) {
    CUDA_RETURN_IF_ERROR(cudaSetDevice(timed.device));
    StreamTimer timer;
    timer.timed = &timed;
    ASSIGN_OR_RETURN(timer.start, CudaEvent::Create());
    ASSIGN_OR_RETURN(timer.stop, CudaEvent::Create());
    if (cold) {
      ASSIGN_OR_RETURN(L2Flusher flush, L2Flusher::Create(setup.gpu));
      timer.flush.emplace(std::move(flush));
    }
    if (options.graph_launches_per_sample() > 0) {
      timer.graph = std::make_unique<CudaGraph>();
      RETURN_IF_ERROR(
          timer.graph->Capture(timed.launch, options.graph_launches_per_sample(), timed.stream));
    }
    timers.push_back(std::move(timer));
  }
  return timers;
}

absl::Status RunSample(const StreamTimer& timer, int eager_launches) {
  if (timer.graph != nullptr) return timer.graph->Launch(timer.timed->stream);
  for (int launch = 0; launch < eager_launches; ++launch) {
    RETURN_IF_ERROR(timer.timed->launch(timer.timed->stream));
  }
  return absl::OkStatus();
}

// Launches a sample times: the graph's captured count, or the eager batch (at least one).
int UnitsPerSample(const api::MeasurementOptions& options) {
  return options.graph_launches_per_sample() > 0
             ? options.graph_launches_per_sample()
             : std::max(1, options.eager_launches_per_sample());
}

// Queues one sample on every stream behind the blocker, releases them together and returns
// the slowest stream's time per unit of work.
absl::Status WaitForStream(const MeasurementSetup& setup, cudaStream_t stream) {
  if (setup.wait_for_stream) return setup.wait_for_stream(stream);
  return CudaStatus(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

absl::StatusOr<double> TimeOneSample(const MeasurementSetup& setup,
                                     std::vector<StreamTimer>& timers, StreamBlocker& blocker,
                                     int64_t sample_index, int units_per_sample) {
  ScaffoldingMarker* scaffolding_marker = setup.scaffolding_marker;
  absl::Status queued = absl::OkStatus();
  for (StreamTimer& timer : timers) {
    if (!queued.ok()) break;
    const cudaStream_t stream = timer.timed->stream;
    queued = CudaStatus(cudaSetDevice(timer.timed->device), "cudaSetDevice");
    if (queued.ok()) {
      // Only the flush and the blocker: the workload's launches must stay untagged.
      const ScopedScaffolding scaffolding(scaffolding_marker);
      if (timer.flush.has_value()) queued = timer.flush->Flush(stream, sample_index);
      if (queued.ok()) queued = blocker.Block(stream);
      // Lines the stream up with its peers' (other ranks' streams) before the clock starts.
      if (queued.ok() && setup.align_before_sample) queued = setup.align_before_sample(stream);
    }
    // Everything of the sample is queued before the blocker lets the GPU start on it.
    if (queued.ok()) queued = timer.start.Record(stream);
    if (queued.ok()) queued = RunSample(timer, units_per_sample);
    if (queued.ok()) queued = timer.stop.Record(stream);
  }
  blocker.Release();  // never leave a blocker waiting
  RETURN_IF_ERROR(queued);
  double slowest_ms = 0;
  for (StreamTimer& timer : timers) {
    CUDA_RETURN_IF_ERROR(cudaSetDevice(timer.timed->device));
    RETURN_IF_ERROR(WaitForStream(setup, timer.timed->stream));
    ASSIGN_OR_RETURN(const float milliseconds, ElapsedMilliseconds(timer.start, timer.stop));
    slowest_ms = std::max<double>(slowest_ms, milliseconds);
  }
  return 1000.0 * slowest_ms / units_per_sample;
}

}  // namespace

api::TimingStats ComputeTimingStats(std::vector<double> samples_us) {
  const SampleSummary summary = Summarize(std::move(samples_us));
  api::TimingStats stats;
  if (summary.samples == 0) return stats;
  stats.set_samples(summary.samples);
  stats.set_min_us(summary.min);
  stats.set_median_us(summary.median);
  stats.set_mean_us(summary.mean);
  stats.set_p90_us(summary.p90);
  stats.set_p99_us(summary.p99);
  stats.set_max_us(summary.max);
  stats.set_relative_noise(summary.relative_noise);
  return stats;
}

void FillBandwidth(int64_t bytes_per_launch, double median_us, double spec_peak_gbps,
                   double measured_copy_gbps, api::GpuMeasurement& measurement) {
  measurement.set_bytes_moved(bytes_per_launch);
  if (median_us <= 0) return;
  const double gbps = static_cast<double>(bytes_per_launch) / (median_us * 1e-6) / 1e9;
  measurement.set_bandwidth_gbps(gbps);
  if (spec_peak_gbps > 0) measurement.set_pct_of_spec_peak_bandwidth(100.0 * gbps / spec_peak_gbps);
  if (measured_copy_gbps > 0) {
    measurement.set_pct_of_measured_copy_bandwidth(100.0 * gbps / measured_copy_gbps);
  }
}

void FillFlops(double flops_per_launch, double median_us, double spec_peak_tflops,
               api::GpuMeasurement& measurement) {
  if (flops_per_launch <= 0) return;
  measurement.set_flops(flops_per_launch);
  if (median_us <= 0) return;
  const double tflops = flops_per_launch / (median_us * 1e-6) / 1e12;
  measurement.set_tflops(tflops);
  if (spec_peak_tflops > 0) measurement.set_pct_of_spec_peak_flops(100.0 * tflops / spec_peak_tflops);
}

absl::StatusOr<MeasurementOutcome> MeasureStreams(const MeasurementSetup& setup,
                                                  absl::Span<const TimedStream> streams,
                                                  const PhaseProgress& progress) {
  if (streams.empty()) return absl::InvalidArgumentError("measure: no stream to time");
  const api::MeasurementOptions& options = setup.options;
  MeasurementOutcome outcome;
  api::GpuMeasurement& measurement = outcome.measurement;
  const bool cold = options.l2_mode() == api::MeasurementOptions::L2_MODE_COLD;
  measurement.set_l2_mode(cold ? api::MeasurementOptions::L2_MODE_COLD
                               : api::MeasurementOptions::L2_MODE_HOT);

  // Resources first, so that nothing fails half-way through the timed loop.
  int current_device = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&current_device));
  ASSIGN_OR_RETURN(StreamBlocker blocker, StreamBlocker::Create());
  ASSIGN_OR_RETURN(std::vector<StreamTimer> timers, PrepareStreams(setup, streams));
  measurement.set_used_cuda_graph(options.graph_launches_per_sample() > 0);
  const int units_per_sample = UnitsPerSample(options);
  measurement.set_launches_per_sample(units_per_sample);

  // Warm-up: clocks up, caches and TLBs set, lazy module loading done.
  const int warmup = options.warmup_iterations();
  progress(api::PHASE_WARMUP, 0, warmup, "warming up");
  for (int i = 0; i < warmup; ++i) {
    for (const StreamTimer& timer : timers) {
      CUDA_RETURN_IF_ERROR(cudaSetDevice(timer.timed->device));
      RETURN_IF_ERROR(RunSample(timer, units_per_sample));
    }
  }
  for (const StreamTimer& timer : timers) {
    CUDA_RETURN_IF_ERROR(cudaSetDevice(timer.timed->device));
    RETURN_IF_ERROR(WaitForStream(setup, timer.timed->stream));
  }
  progress(api::PHASE_WARMUP, warmup, warmup, "warmed up");

  const ClockProbe clocks(setup.gpu.uuid());
  const std::optional<unsigned> clock_before = clocks.SmClockMhz();

  const auto criteria = StopCriteriaFor(options);
  const int64_t max_samples = MaxSamplesFor(options);
  std::vector<double> samples_us;
  samples_us.reserve(std::min<int64_t>(max_samples, 100'000));
  RunningNoise running;
  const auto timed_start = Clock::now();
  auto last_progress = timed_start;
  progress(api::PHASE_TIMED, 0, max_samples, "timing");
  std::string stop_reason;
  SamplingState state;
  while (stop_reason.empty()) {
    ASSIGN_OR_RETURN(const double sample,
                     TimeOneSample(setup, timers, blocker,
                                   static_cast<int64_t>(samples_us.size()), units_per_sample));
    samples_us.push_back(sample);
    running.Add(sample);
    const auto now = Clock::now();
    state.samples = running.count();
    state.relative_noise = running.relative_noise();
    state.elapsed = absl::FromChrono(now - timed_start);
    // A sample is the time per unit; the floor counts every unit the sample timed.
    state.measured += absl::Microseconds(sample * units_per_sample);
    stop_reason = FirstStopReason(criteria, state);
    if (stop_reason.empty() && now - last_progress >= kProgressInterval) {
      last_progress = now;
      progress(api::PHASE_TIMED, running.count(), max_samples,
               absl::StrFormat("%d samples, mean %.2f us, noise %.2f%%", running.count(),
                               running.mean(), 100 * running.relative_noise()));
    }
  }
  const std::optional<unsigned> clock_after = clocks.SmClockMhz();
  CUDA_RETURN_IF_ERROR(cudaSetDevice(current_device));

  *measurement.mutable_kernel_time() = ComputeTimingStats(samples_us);
  measurement.set_stop_reason(DescribeStop(stop_reason, state, options));
  const double median_us = measurement.kernel_time().median_us();
  FillBandwidth(setup.bytes_per_launch, median_us, setup.gpu.spec_peak_bandwidth_gbps(),
                setup.gpu.measured_copy_bandwidth_gbps(), measurement);
  FillFlops(setup.flops_per_launch, median_us, setup.spec_peak_tflops, measurement);
  if (setup.bytes_per_launch > 0 && setup.gpu.measured_copy_bandwidth_gbps() <= 0) {
    outcome.not_collected.push_back(absl::StrCat(
        "pct_of_measured_copy_bandwidth: the daemon has no copy bandwidth measured for GPU ",
        setup.gpu.index()));
  }
  progress(api::PHASE_TIMED, measurement.kernel_time().samples(), max_samples,
           measurement.stop_reason());

  // Throttling: NVML's clock and reasons when available; the samples' drift either way.
  std::string throttling;
  if (clock_before.has_value() && clock_after.has_value()) {
    throttling =
        DescribeClockThrottling(*clock_before, *clock_after, clocks.ClocksEventReasons());
  } else {
    outcome.not_collected.push_back(
        absl::StrCat("SM clock readings (NVML: ",
                     clocks.unavailable().empty() ? "clock query failed" : clocks.unavailable(),
                     "); throttling judged from the drift of sample times only"));
  }
  const std::string drift = DescribeTimingDrift(samples_us);
  if (!drift.empty()) {
    throttling = throttling.empty() ? drift : absl::StrCat(throttling, "; ", drift);
  }
  measurement.set_throttling(throttling);
  return outcome;
}

}  // namespace gpuprof::measure
