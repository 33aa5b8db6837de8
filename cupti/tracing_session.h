// What a GPU workload runner uses for CUPTI: tracing per the request's TracingOptions, phase
// marks, activity records streamed as ActivityBatch events while the workload runs, and at
// the end the hardware metrics and warp stalls attached to the kernels they describe.
//
//   TracingSession tracing(run.request().tracing(), GpuIdsByDevice(run), emit);
//   tracing.OnPhase(v1::PHASE_WARMUP);           // on every progress report
//   setup.scaffolding_marker = tracing.scaffolding_marker();
//   ... timed samples (blocker and L2 flush records come out flagged as scaffolding) ...
//   tracing.ProfileKernels([&] { return LaunchOnceAndSync(); });   // METRICS / FULL only
//   tracing.Finish(result);                       // last batches; fills dropped / not_collected
//
// Never fails the experiment: what cannot be collected becomes a not_collected line.
#ifndef GPUPROF_CUPTI_TRACING_SESSION_H_
#define GPUPROF_CUPTI_TRACING_SESSION_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cupti/activity_tracer.h"
#include "cupti/pc_sampling.h"
#include "gpuprof/v1/experiment.pb.h"
#include "measure/launch_annotations.h"

namespace gpuprof::cupti {

// Sends an event towards the daemon (the worker's EventEmitter has this shape).
using ActivityEventEmitter = std::function<void(const ::gpuprof::v1::ExperimentEvent&)>;

struct TracingSessionLimits {
  // Records per ActivityBatch event, at most.
  size_t max_records_per_event = 2000;
  // OnPhase emits what CUPTI delivered when at least this long passed since the last emission.
  absl::Duration emit_interval = absl::Milliseconds(500);
  // Kernels profiled by ProfileKernels, at most.
  size_t max_profiled_kernels = 64;
};

class TracingSession {
 public:
  // Starts tracing at `options.level` (UNSPECIFIED means ACTIVITY). `gpu_id_by_device` maps
  // this process's CUDA device ordinals to the daemon's GPU ids (the run's GPUs in order).
  TracingSession(const ::gpuprof::v1::TracingOptions& options,
                 std::vector<int32_t> gpu_id_by_device, ActivityEventEmitter emit,
                 TracingSessionLimits limits = {});
  TracingSession(const TracingSession&) = delete;
  TracingSession& operator=(const TracingSession&) = delete;
  ~TracingSession();

  // Marks `phase` when it differs from the current one, and emits the records CUPTI delivered
  // when the emit interval has passed. Cheap enough to call on every progress report.
  void OnPhase(::gpuprof::v1::Phase phase);

  // At METRICS and FULL: runs `launch` (which must enqueue the workload's kernels once and
  // wait for them) in PHASE_PROFILING (the phase stays open until the next OnPhase), under the range profiler with kernel replay, and at
  // FULL once more under PC sampling. The kernels it runs are not timed; their records carry
  // the metrics. At OFF and ACTIVITY it does nothing. A failing `launch` is returned; failures
  // of the profilers only become not_collected lines.
  absl::Status ProfileKernels(const std::function<absl::Status()>& launch);

  // Stops tracing, emits the remaining records (profiling records with their metrics) and adds
  // dropped records, how kernels were replayed and what was not collected to `result`.
  void Finish(::gpuprof::v1::ExperimentResult& result);

  ::gpuprof::v1::TracingOptions::Level level() const { return level_; }

  // At FULL, after ProfileKernels: each sampled kernel's stalls, per instruction too (empty when
  // PC sampling took nothing).
  const std::vector<StallBreakdown>& stall_breakdowns() const { return stall_breakdowns_; }

  // For measure::MeasurementSetup: tags the measurement core's own launches so that their
  // records carry `scaffolding`. Does nothing while tracing is off or finished.
  ::gpuprof::measure::ScaffoldingMarker* scaffolding_marker() { return &scaffolding_marker_; }

 private:
  // Pushes and pops the tracer's scaffolding tag; an End without its Begin pops nothing.
  class TracerScaffoldingMarker : public ::gpuprof::measure::ScaffoldingMarker {
   public:
    explicit TracerScaffoldingMarker(TracingSession& session) : session_(session) {}
    void Begin() override;
    void End() override;

   private:
    TracingSession& session_;
    bool open_ = false;
  };

  // Takes what the tracer has, holds back profiling-phase kernels, emits the rest.
  void EmitPending(bool forced);
  void EmitRecords(std::vector<::gpuprof::v1::ActivityRecord> records, int64_t dropped);

  ::gpuprof::v1::TracingOptions options_;
  ::gpuprof::v1::TracingOptions::Level level_;
  ActivityEventEmitter emit_;
  TracingSessionLimits limits_;
  std::optional<ActivityTracer> tracer_;
  ::gpuprof::v1::Phase phase_ = ::gpuprof::v1::PHASE_UNSPECIFIED;
  absl::Time last_emit_ = absl::InfinitePast();
  int64_t dropped_total_ = 0;
  bool finished_ = false;
  std::vector<std::string> not_collected_;
  // Kernel and phase records of PHASE_PROFILING, emitted by Finish with their metrics.
  std::vector<::gpuprof::v1::ActivityRecord> held_back_;
  // Metrics by profiled launch, in launch order, and stall percentages by kernel name.
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, double>>>> launch_metrics_;
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, double>>>> stall_metrics_;
  std::vector<StallBreakdown> stall_breakdowns_;
  std::string replay_description_;
  // Correlation ids of the kernels launched under the range profiler.
  std::vector<uint32_t> metrics_run_;
  TracerScaffoldingMarker scaffolding_marker_{*this};
};

// The metrics of profiled launches attached to the profiling-phase kernel records of the
// range profiler's run (those with a correlation id in `metrics_run`, or all of them when it
// is empty): in launch order (sorted by correlation id) when the counts match, else by kernel
// name. Stall percentages go to every profiling record of the kernel they were sampled in.
// Pure; exposed for tests.
void AttachKernelMetrics(
    const std::vector<std::pair<std::string, std::vector<std::pair<std::string, double>>>>&
        launch_metrics,
    const std::vector<std::pair<std::string, std::vector<std::pair<std::string, double>>>>&
        stall_metrics,
    const std::vector<uint32_t>& metrics_run, std::vector<::gpuprof::v1::ActivityRecord>& records);

}  // namespace gpuprof::cupti

#endif  // GPUPROF_CUPTI_TRACING_SESSION_H_
