// The measurement core every GPU workload uses (nvbench's method): warm-up, then samples of
// CUDA-event timing behind a stream blocker (launch latency is not timed), optionally N
// launches per sample captured in a CUDA graph, a cold-L2 mode, stop criteria as objects,
// clock-throttling checks, statistics, and the figures against the GPU: bandwidth as % of its
// spec peak and of its measured copy bandwidth, FLOP/s as % of its spec peak.
//
// It times a set of streams: every stream's work of one sample is queued behind the same
// blocker, released together, and the sample is the slowest stream's time (NCCL ranks driven
// from one process, or a workload that spreads over streams).
#ifndef GPUPROF_MEASURE_TIMING_LOOP_H_
#define GPUPROF_MEASURE_TIMING_LOOP_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/gpus.pb.h"
#include "measure/launch_annotations.h"

namespace gpuprof::measure {

// Reports a phase's progress (done of total, with a short message).
using PhaseProgress = std::function<void(gpuprof::v1::Phase phase, int64_t done, int64_t total,
                                         const std::string& message)>;

// Enqueues the work of one timed unit (one kernel launch, or a fixed group such as the two
// launches of a separate-K/V store) on the stream.
using LaunchFunction = std::function<absl::Status(cudaStream_t stream)>;

// One stream to time and what to enqueue on it.
struct TimedStream {
  cudaStream_t stream = nullptr;
  // The CUDA device the stream belongs to (this process's ordinal).
  int device = 0;
  LaunchFunction launch;
};

struct MeasurementSetup {
  gpuprof::v1::MeasurementOptions options;
  // Bytes read + bytes written by one unit of work (over every stream).
  int64_t bytes_per_launch = 0;
  // Floating-point operations of one unit of work; 0 when FLOP/s mean nothing for it.
  double flops_per_launch = 0;
  // The GPU's peak for the data type the FLOPs are done in (TFLOP/s); 0 when unknown.
  double spec_peak_tflops = 0;
  // The GPU as the daemon described it: spec peaks, measured copy bandwidth, L2, UUID.
  gpuprof::v1::GpuInfo gpu;
  // Told around every launch of the core's own (blocker, L2 flush) so that a tracer can flag
  // their records; optional.
  ScaffoldingMarker* scaffolding_marker = nullptr;
  // Waits until everything queued on a stream has run. Unset: cudaStreamSynchronize. Work
  // that may wait on other processes (NCCL ranks) sets one that gives up at a deadline
  // instead of waiting forever.
  std::function<absl::Status(cudaStream_t stream)> wait_for_stream;
  // Enqueued behind the blocker and before each sample's start event, untimed and marked as
  // scaffolding. NCCL ranks in separate processes release their blockers at slightly
  // different times; a tiny collective here lets every rank's clock start together.
  std::function<absl::Status(cudaStream_t stream)> align_before_sample;
};

struct MeasurementOutcome {
  gpuprof::v1::GpuMeasurement measurement;
  // What could not be measured or checked, and why (for ExperimentResult.not_collected).
  std::vector<std::string> not_collected;
};

// Times the streams' work per `setup.options`. The launches must not synchronise the host.
absl::StatusOr<MeasurementOutcome> MeasureStreams(const MeasurementSetup& setup,
                                                  absl::Span<const TimedStream> streams,
                                                  const PhaseProgress& progress);

// ---- Pure pieces, exposed for tests. ----

// samples, min, median, mean, p90, p99, max (nearest rank), relative noise (stddev / mean).
gpuprof::v1::TimingStats ComputeTimingStats(std::vector<double> samples_us);

// Fills bytes_moved, bandwidth and the two percentages from the median time. A percentage
// stays 0 when its reference is unknown (0).
void FillBandwidth(int64_t bytes_per_launch, double median_us, double spec_peak_gbps,
                   double measured_copy_gbps, gpuprof::v1::GpuMeasurement& measurement);

// Fills flops, tflops and the percentage of `spec_peak_tflops` (0 when unknown).
void FillFlops(double flops_per_launch, double median_us, double spec_peak_tflops,
               gpuprof::v1::GpuMeasurement& measurement);

}  // namespace gpuprof::measure

#endif  // GPUPROF_MEASURE_TIMING_LOOP_H_
