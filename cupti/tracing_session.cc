#include "cupti/tracing_session.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cuda_status.h"
#include "cupti/activity_records.h"
#include "cupti/kernel_metrics.h"
#include "cupti/metric_names.h"
#include "cupti/pc_sampling.h"

namespace gpuprof::cupti {
namespace {

namespace api = ::gpuprof::v1;

using MetricList = std::vector<std::pair<std::string, double>>;

// Auto ranges come back named by their index ("0", "1", ...), not by kernel.
bool IsIndexName(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(),
                                      [](char c) { return c >= '0' && c <= '9'; });
}

bool SameKernel(const api::ActivityRecord& record, const std::string& cupti_name) {
  return record.name() == cupti_name || record.name() == cupti::DemangleKernelName(cupti_name);
}

bool IsProfilingKernel(const api::ActivityRecord& record) {
  return record.phase() == api::PHASE_PROFILING &&
         record.kind() == api::ActivityRecord::KIND_KERNEL;
}

}  // namespace

void AttachKernelMetrics(const std::vector<std::pair<std::string, MetricList>>& launch_metrics,
                         const std::vector<std::pair<std::string, MetricList>>& stall_metrics,
                         const std::vector<uint32_t>& metrics_run,
                         std::vector<api::ActivityRecord>& records) {
  std::vector<api::ActivityRecord*> all_kernels;
  std::vector<api::ActivityRecord*> kernels;  // of the range profiler's run
  for (api::ActivityRecord& record : records) {
    if (!IsProfilingKernel(record)) continue;
    all_kernels.push_back(&record);
    if (metrics_run.empty() || std::find(metrics_run.begin(), metrics_run.end(),
                                         record.correlation_id()) != metrics_run.end()) {
      kernels.push_back(&record);
    }
  }
  std::stable_sort(kernels.begin(), kernels.end(), [](const auto* a, const auto* b) {
    return a->correlation_id() < b->correlation_id();
  });
  // Kernel replay may deliver one record per pass; the launch is the correlation id.
  std::vector<api::ActivityRecord*> launches;
  for (api::ActivityRecord* kernel : kernels) {
    if (launches.empty() || launches.back()->correlation_id() != kernel->correlation_id() ||
        kernel->correlation_id() == 0) {
      launches.push_back(kernel);
    }
  }
  auto apply = [&](const MetricList& metrics, uint32_t correlation_id,
                   api::ActivityRecord* single) {
    for (api::ActivityRecord* kernel : kernels) {
      if (kernel == single || (correlation_id != 0 && kernel->correlation_id() == correlation_id)) {
        for (const auto& [name, value] : metrics) (*kernel->mutable_metrics())[name] = value;
      }
    }
  };
  bool by_order = launches.size() == launch_metrics.size();
  for (size_t i = 0; by_order && i < launches.size(); ++i) {
    // A range named after a kernel other than the launch's means the order cannot be trusted.
    const std::string& range_name = launch_metrics[i].first;
    if (!range_name.empty() && !IsIndexName(range_name) &&
        !SameKernel(*launches[i], range_name)) {
      by_order = false;
    }
  }
  if (by_order) {
    for (size_t i = 0; i < launches.size(); ++i) {
      apply(launch_metrics[i].second, launches[i]->correlation_id(), launches[i]);
    }
  } else {
    for (const auto& [range_name, metrics] : launch_metrics) {
      for (api::ActivityRecord* kernel : kernels) {
        if (SameKernel(*kernel, range_name)) {
          for (const auto& [name, value] : metrics) (*kernel->mutable_metrics())[name] = value;
        }
      }
    }
  }
  for (const auto& [function, stalls] : stall_metrics) {
    for (api::ActivityRecord* kernel : all_kernels) {
      if (!SameKernel(*kernel, function)) continue;
      for (const auto& [name, value] : stalls) (*kernel->mutable_metrics())[name] = value;
    }
  }
}

TracingSession::TracingSession(const api::TracingOptions& options,
                               std::vector<int32_t> gpu_id_by_device, ActivityEventEmitter emit,
                               TracingSessionLimits limits)
    : options_(options),
      level_(options.level() == api::TracingOptions::LEVEL_UNSPECIFIED
                 ? api::TracingOptions::LEVEL_ACTIVITY
                 : options.level()),
      emit_(std::move(emit)),
      limits_(limits) {
  if (level_ == api::TracingOptions::LEVEL_OFF) return;
  absl::StatusOr<ActivityTracer> tracer =
      ActivityTracer::Start({.gpu_id_by_device = std::move(gpu_id_by_device)});
  if (!tracer.ok()) {
    not_collected_.push_back(cupti::NotCollectedLine("activity records", tracer.status()));
    return;
  }
  tracer_.emplace(*std::move(tracer));
  for (const std::string& note : tracer_->notes()) not_collected_.push_back(note);
}

TracingSession::~TracingSession() {
  if (!finished_ && tracer_.has_value()) {
    // A runner that failed midway: the records it made are still the experiment's story.
    api::ExperimentResult discarded;
    Finish(discarded);
  }
}

void TracingSession::TracerScaffoldingMarker::Begin() {
  if (open_ || !session_.tracer_.has_value() || session_.finished_) return;
  session_.tracer_->BeginScaffolding();
  open_ = true;
}

void TracingSession::TracerScaffoldingMarker::End() {
  if (!open_) return;
  open_ = false;
  if (session_.tracer_.has_value()) session_.tracer_->EndScaffolding();
}

void TracingSession::OnPhase(api::Phase phase) {
  if (!tracer_.has_value() || finished_) return;
  if (phase != phase_) {
    tracer_->SetPhase(phase);
    phase_ = phase;
  }
  if (absl::Now() - last_emit_ >= limits_.emit_interval) EmitPending(/*forced=*/false);
}

void TracingSession::EmitPending(bool forced) {
  last_emit_ = absl::Now();
  // Flush holds no lock of ours or the tracer's: CUPTI calls back into the tracer from it.
  if (const absl::Status flushed = tracer_->Flush(forced); !flushed.ok()) {
    LogStatusToStderr(flushed);
  }
  api::ActivityBatch batch = tracer_->TakeBatch();
  std::vector<api::ActivityRecord> ready;
  ready.reserve(batch.records_size());
  for (api::ActivityRecord& record : *batch.mutable_records()) {
    // Profiling kernels and the profiling phase wait for their metrics (Finish).
    if (IsProfilingKernel(record) || (record.kind() == api::ActivityRecord::KIND_PHASE &&
                                      record.phase() == api::PHASE_PROFILING)) {
      held_back_.push_back(std::move(record));
    } else {
      ready.push_back(std::move(record));
    }
  }
  EmitRecords(std::move(ready), batch.dropped_records());
}

void TracingSession::EmitRecords(std::vector<api::ActivityRecord> records, int64_t dropped) {
  dropped_total_ += dropped;
  if (records.empty() && dropped == 0) return;
  const size_t chunk = std::max<size_t>(limits_.max_records_per_event, 1);
  size_t next = 0;
  do {
    api::ExperimentEvent event;
    api::ActivityBatch* batch = event.mutable_activity();
    const size_t end = std::min(records.size(), next + chunk);
    for (; next < end; ++next) *batch->add_records() = std::move(records[next]);
    // The drop count travels once, with the first event.
    if (dropped > 0) {
      batch->set_dropped_records(dropped);
      dropped = 0;
    }
    emit_(event);
  } while (next < records.size());
}

absl::Status TracingSession::ProfileKernels(const std::function<absl::Status()>& launch) {
  if (level_ != api::TracingOptions::LEVEL_METRICS && level_ != api::TracingOptions::LEVEL_FULL) {
    return absl::OkStatus();
  }
  // Everything recorded so far is converted before the profiler starts: kernel names are
  // CUPTI's strings, and profiler set-up and tear-down must not be able to pull them away.
  if (tracer_.has_value()) {
    if (const absl::Status synced = CudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize()");
        !synced.ok()) {
      return synced;
    }
    EmitPending(/*forced=*/true);
  }
  OnPhase(api::PHASE_PROFILING);
  std::vector<std::string> metric_names(options_.extra_metrics().begin(),
                                        options_.extra_metrics().end());
  absl::Status launch_status = absl::OkStatus();
  std::vector<uint32_t>* launched_under = &metrics_run_;
  // The profilers report the workload's own failure through `launch`; keep it apart from
  // theirs.
  auto tracked_launch = [&]() -> absl::Status {
    absl::Status status = launch();
    if (!status.ok()) launch_status = status;
    // The replayed kernels' records, taken while the profiler still runs (see above).
    if (status.ok() && tracer_.has_value()) {
      const size_t before = held_back_.size();
      EmitPending(/*forced=*/true);
      for (size_t i = before; launched_under != nullptr && i < held_back_.size(); ++i) {
        if (IsProfilingKernel(held_back_[i])) {
          launched_under->push_back(held_back_[i].correlation_id());
        }
      }
    }
    return status;
  };
  absl::StatusOr<cupti::KernelMetricsReport> metrics = cupti::CollectKernelMetrics(
      {.metric_names = cupti::KernelMetricNames(metric_names),
       .max_kernels = limits_.max_profiled_kernels},
      tracked_launch);
  if (!launch_status.ok()) return launch_status;
  if (metrics.ok()) {
    replay_description_ = metrics->replay_description;
    for (const std::string& unsupported : metrics->unsupported_metrics) {
      not_collected_.push_back(absl::StrCat("hardware metric ", unsupported));
    }
    if (metrics->dropped_ranges > 0) {
      not_collected_.push_back(absl::StrCat("hardware metrics: ", metrics->dropped_ranges,
                                            " kernel launches past the first ",
                                            limits_.max_profiled_kernels, " were not profiled"));
    }
    for (cupti::ProfiledKernel& kernel : metrics->kernels) {
      MetricList values(kernel.values.begin(), kernel.values.end());
      std::sort(values.begin(), values.end());
      launch_metrics_.push_back({kernel.range_name, std::move(values)});
    }
  } else {
    not_collected_.push_back(cupti::NotCollectedLine("hardware metrics", metrics.status()));
  }

  if (level_ == api::TracingOptions::LEVEL_FULL) {
    launched_under = nullptr;  // PC sampling's launches carry stalls, not counters
    absl::StatusOr<std::vector<cupti::StallBreakdown>> stalls =
        cupti::CollectStallBreakdown({}, tracked_launch);
    if (!launch_status.ok()) return launch_status;
    if (stalls.ok()) {
      for (const cupti::StallBreakdown& breakdown : *stalls) {
        MetricList values;
        for (const auto& [reason, percent] : breakdown.percent_by_reason) {
          values.push_back({cupti::StallMetricName(reason), percent});
        }
        values.push_back(
            {std::string(cupti::kStallSampleCountMetric), static_cast<double>(breakdown.samples)});
        stall_metrics_.push_back({breakdown.function_name, std::move(values)});
      }
      if (stalls->empty()) {
        not_collected_.push_back("warp stalls: not collected: PC sampling took no samples");
      }
      stall_breakdowns_ = *std::move(stalls);
    } else {
      not_collected_.push_back(cupti::NotCollectedLine("warp stalls", stalls.status()));
    }
  }
  return absl::OkStatus();
}

void TracingSession::Finish(api::ExperimentResult& result) {
  if (finished_) return;
  // A runner that failed inside a scaffolding launch: leave no tag pushed on this thread.
  scaffolding_marker_.End();
  finished_ = true;
  if (tracer_.has_value()) {
    if (const absl::Status stopped = tracer_->Stop(); !stopped.ok()) LogStatusToStderr(stopped);
    // Stop flushed every buffer; take the rest, then give CUPTI's activity state back.
    EmitPending(/*forced=*/true);
    AttachKernelMetrics(launch_metrics_, stall_metrics_, metrics_run_, held_back_);
    for (api::ActivityRecord& record : held_back_) {
      if (record.kind() == api::ActivityRecord::KIND_PHASE && !replay_description_.empty()) {
        record.set_name(absl::StrCat("profiling (", replay_description_, ")"));
      }
    }
    EmitRecords(std::move(held_back_), 0);
    held_back_.clear();
    if (const int64_t left_out = tracer_->launch_records_left_out(); left_out > 0) {
      not_collected_.push_back(absl::StrCat(
          "launch API records: ", left_out, " past the first ", tracer_->max_launch_records(),
          " were left out (the trace draws no arrow to their GPU work)"));
    }
    if (const size_t refused = tracer_->refused_buffer_requests(); refused > 0) {
      not_collected_.push_back(absl::StrCat(
          "activity records: CUPTI asked for a buffer ", refused,
          " times while all were in use; the records it could not store are counted as dropped"));
    }
    tracer_.reset();
  }
  result.set_dropped_activity_records(result.dropped_activity_records() + dropped_total_);
  if (!replay_description_.empty()) {
    (*result.mutable_kernel_config())["hardware_metrics_replay"] = replay_description_;
  }
  for (const std::string& line : not_collected_) result.add_not_collected(line);
}

}  // namespace gpuprof::cupti
