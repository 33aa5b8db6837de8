#include "report/story_analysis.h"

#include <algorithm>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/statistics.h"
#include "cupti/metric_names.h"

namespace gpuprof::report {
namespace {

using ::gpuprof::cupti::kDramThroughputPct;
using ::gpuprof::cupti::kSmThroughputPct;
using ::gpuprof::cupti::kStallMetricPrefix;
using ::gpuprof::cupti::kStallSampleCountMetric;

namespace api = ::gpuprof::v1;

// Below this both throughputs mean the kernel keeps neither DRAM nor the SMs busy.
constexpr double kLowThroughputPct = 40;
// A kernel this short spends much of its life launching and ramping up.
constexpr double kShortKernelUs = 3;
constexpr double kShortKernelThroughputPct = 60;
constexpr size_t kMaxStallReasons = 4;

std::string Percent(double value) { return absl::StrFormat("%.0f%%", value); }

std::optional<double> Metric(const MetricMap& metrics, absl::string_view name) {
  const auto it = metrics.find(std::string(name));
  if (it == metrics.end()) return std::nullopt;
  return it->second;
}

bool IsWorkloadKernel(const RecordGroup& group) { return group.is_kernel() && !group.scaffolding; }

std::vector<std::pair<std::string, double>> TopStalls(const MetricMap& metrics) {
  std::vector<std::pair<std::string, double>> stalls;
  for (const auto& [name, value] : metrics) {
    if (absl::StartsWith(name, kStallMetricPrefix)) {
      stalls.push_back({name.substr(kStallMetricPrefix.size()), value});
    }
  }
  std::sort(stalls.begin(), stalls.end(), [](const auto& a, const auto& b) {
    return a.second > b.second || (a.second == b.second && a.first < b.first);
  });
  if (stalls.size() > kMaxStallReasons) stalls.resize(kMaxStallReasons);
  return stalls;
}

// Samples of the timed phase: the result's count, else the fewest stream blocker launches on
// any GPU (one per stream and sample).
int64_t CountSamples(const PhaseNode* timed, const api::ExperimentResult& result) {
  if (result.measurement().kernel_time().samples() > 0) {
    return result.measurement().kernel_time().samples();
  }
  if (timed == nullptr) return 0;
  absl::flat_hash_map<int32_t, int64_t> blockers_by_gpu;
  for (const RecordGroup& group : timed->groups) {
    if (group.is_kernel() && group.scaffolding) blockers_by_gpu[group.gpu_id] += group.count;
  }
  int64_t fewest = 0;
  for (const auto& [gpu, count] : blockers_by_gpu) {
    fewest = fewest == 0 ? count : std::min(fewest, count);
  }
  return fewest;
}

AchievedFigures Achieved(const api::ExperimentResult& result, const api::GpuInfo& gpu) {
  const api::GpuMeasurement& measurement = result.measurement();
  AchievedFigures figures;
  figures.median_us = measurement.kernel_time().median_us();
  figures.bandwidth_gbps = measurement.bandwidth_gbps();
  figures.pct_of_spec_peak_bandwidth = measurement.pct_of_spec_peak_bandwidth();
  figures.pct_of_measured_copy_bandwidth = measurement.pct_of_measured_copy_bandwidth();
  figures.tflops = measurement.tflops();
  figures.pct_of_spec_peak_flops = measurement.pct_of_spec_peak_flops();
  // Results stored before the figures were filled in still carry bytes and time.
  if (figures.bandwidth_gbps <= 0 && measurement.bytes_moved() > 0 && figures.median_us > 0) {
    figures.bandwidth_gbps = measurement.bytes_moved() / (figures.median_us * 1e3);
    if (gpu.spec_peak_bandwidth_gbps() > 0) {
      figures.pct_of_spec_peak_bandwidth =
          100 * figures.bandwidth_gbps / gpu.spec_peak_bandwidth_gbps();
    }
    if (gpu.measured_copy_bandwidth_gbps() > 0) {
      figures.pct_of_measured_copy_bandwidth =
          100 * figures.bandwidth_gbps / gpu.measured_copy_bandwidth_gbps();
    }
  }
  if (figures.tflops <= 0 && measurement.flops() > 0 && figures.median_us > 0) {
    figures.tflops = measurement.flops() / (figures.median_us * 1e6);
  }
  figures.classification =
      ClassifyKernel({.median_us = figures.median_us,
                      .bytes_per_launch = static_cast<double>(measurement.bytes_moved()),
                      .flops_per_launch = measurement.flops()},
                     gpu);
  return figures;
}

}  // namespace

const api::GpuInfo& GpuOf(const api::ExperimentResult& result, int32_t gpu_id) {
  for (const api::GpuInfo& gpu : result.provenance().gpus()) {
    if (gpu.index() == gpu_id) return gpu;
  }
  if (!result.provenance().gpus().empty()) return result.provenance().gpus(0);
  return api::GpuInfo::default_instance();
}

KernelClassification ClassifyKernel(const KernelEvidence& evidence, const api::GpuInfo& gpu) {
  const auto dram = Metric(evidence.metrics, kDramThroughputPct);
  const auto sm = Metric(evidence.metrics, kSmThroughputPct);
  const bool short_kernel = evidence.median_us > 0 && evidence.median_us < kShortKernelUs;
  if (dram.has_value() && sm.has_value()) {
    const std::string figures =
        absl::StrCat("DRAM ", Percent(*dram), " of peak, SM ", Percent(*sm));
    const double busiest = std::max(*dram, *sm);
    if (busiest < kLowThroughputPct) {
      return {Boundedness::kLatency,
              absl::StrCat("latency-bound: ", figures,
                           "; neither the memory system nor the SMs are kept busy")};
    }
    if (short_kernel && busiest < kShortKernelThroughputPct) {
      return {Boundedness::kLatency,
              absl::StrFormat("latency-bound: %s; at %.2f us, launch and ramp-up dominate", figures,
                              evidence.median_us)};
    }
    if (*dram >= *sm) {
      return {Boundedness::kMemory, absl::StrCat("memory-bound: ", figures)};
    }
    return {Boundedness::kCompute, absl::StrCat("compute-bound: ", figures)};
  }

  const double peak_gbps = gpu.spec_peak_bandwidth_gbps();
  const double peak_tflops =
      gpu.spec_peak_bf16_tflops() > 0 ? gpu.spec_peak_bf16_tflops() : gpu.spec_peak_fp32_tflops();
  if (evidence.bytes_per_launch > 0 && evidence.median_us > 0 && peak_gbps > 0) {
    const double achieved_gbps = evidence.bytes_per_launch / (evidence.median_us * 1e3);
    const double intensity = evidence.flops_per_launch / evidence.bytes_per_launch;
    const double ridge = peak_tflops > 0 ? peak_tflops * 1e3 / peak_gbps : 0;
    if (ridge > 0 && intensity >= ridge) {
      const double achieved_tflops = evidence.flops_per_launch / (evidence.median_us * 1e6);
      const double pct = 100 * achieved_tflops / peak_tflops;
      const std::string figures = absl::StrFormat(
          "%.3g FLOP/byte is right of the ridge (%.3g); %.1f TFLOP/s = %s of spec peak", intensity,
          ridge, achieved_tflops, Percent(pct));
      if (pct < kLowThroughputPct) {
        return {Boundedness::kLatency, absl::StrCat("latency-bound: ", figures)};
      }
      return {Boundedness::kCompute, absl::StrCat("compute-bound: ", figures)};
    }
    const double pct = 100 * achieved_gbps / peak_gbps;
    const std::string figures = absl::StrFormat(
        "%.3g FLOP/byte is left of the ridge%s; %.0f GB/s = %s of spec peak bandwidth", intensity,
        ridge > 0 ? absl::StrFormat(" (%.3g)", ridge) : "", achieved_gbps, Percent(pct));
    if (pct < kLowThroughputPct || (short_kernel && pct < kShortKernelThroughputPct)) {
      return {Boundedness::kLatency, absl::StrCat("latency-bound: ", figures)};
    }
    return {Boundedness::kMemory, absl::StrCat("memory-bound: ", figures)};
  }

  if (short_kernel) {
    return {Boundedness::kLatency,
            absl::StrFormat("latency-bound: at %.2f us, launch and ramp-up dominate (no hardware "
                            "metrics)",
                            evidence.median_us)};
  }
  return {Boundedness::kUnknown,
          "not classified: no hardware metrics (trace level metrics collects them) and no byte "
          "count for this kernel"};
}

namespace {

// For each workload kernel the timed phase ran the same number of times (with timestamps) on
// every GPU: the spread of the i-th start across the GPUs.
std::vector<LaunchSkew> LaunchSkews(const std::vector<TimedKernel>& kernels,
                                    const std::vector<int32_t>& gpus) {
  absl::flat_hash_map<std::string, std::vector<const RecordGroup*>> by_name;
  std::vector<std::string> names;
  for (const TimedKernel& kernel : kernels) {
    auto& groups = by_name[kernel.group->name];
    if (groups.empty()) names.push_back(kernel.group->name);
    groups.push_back(kernel.group);
  }
  std::vector<LaunchSkew> skews;
  for (const std::string& name : names) {
    const std::vector<const RecordGroup*>& groups = by_name[name];
    if (groups.size() != gpus.size()) continue;
    const size_t launches = groups.front()->starts_ns.size();
    bool aligned = launches > 0;
    for (const RecordGroup* group : groups)
      aligned = aligned && group->starts_ns.size() == launches;
    if (!aligned) continue;
    std::vector<std::vector<int64_t>> starts;
    for (const RecordGroup* group : groups) {
      starts.push_back(group->starts_ns);
      std::sort(starts.back().begin(), starts.back().end());
    }
    LaunchSkew skew{.kernel = name, .launches = static_cast<int64_t>(launches)};
    std::vector<double> spreads;
    absl::flat_hash_map<int32_t, int64_t> last_count;
    for (size_t i = 0; i < launches; ++i) {
      int64_t earliest = starts[0][i];
      int64_t latest = starts[0][i];
      size_t latest_group = 0;
      for (size_t g = 1; g < starts.size(); ++g) {
        earliest = std::min(earliest, starts[g][i]);
        if (starts[g][i] > latest) {
          latest = starts[g][i];
          latest_group = g;
        }
      }
      spreads.push_back(static_cast<double>(latest - earliest));
      skew.max_ns = std::max(skew.max_ns, latest - earliest);
      if (latest > earliest) ++last_count[groups[latest_group]->gpu_id];
    }
    skew.median_ns = Median(std::move(spreads));
    int64_t most = 0;
    for (const RecordGroup* group : groups) {
      if (last_count[group->gpu_id] > most) {
        most = last_count[group->gpu_id];
        skew.latest_gpu = group->gpu_id;
      }
    }
    skews.push_back(std::move(skew));
  }
  return skews;
}

}  // namespace

StoryAnalysis AnalyseStory(const StoryTimeline& timeline, const api::ExperimentResult& result) {
  StoryAnalysis analysis;
  const PhaseNode* timed = nullptr;
  for (const PhaseNode& node : timeline.phases) {
    if (node.phase == api::PHASE_TIMED && timed == nullptr) timed = &node;
  }

  // The workload's kernels of the timed phase and their shares of each GPU's kernel time.
  absl::flat_hash_map<int32_t, int64_t> timed_ns_by_gpu;
  std::vector<int32_t> timed_gpus;
  if (timed != nullptr) {
    for (const RecordGroup& group : timed->groups) {
      if (!IsWorkloadKernel(group)) continue;
      analysis.timed_kernels.push_back({.group = &group});
      if (!timed_ns_by_gpu.contains(group.gpu_id)) timed_gpus.push_back(group.gpu_id);
      timed_ns_by_gpu[group.gpu_id] += group.total_ns;
    }
  }
  analysis.samples = CountSamples(timed, result);
  for (TimedKernel& kernel : analysis.timed_kernels) {
    const int64_t gpu_ns = timed_ns_by_gpu[kernel.group->gpu_id];
    kernel.share_pct = gpu_ns > 0 ? 100.0 * kernel.group->total_ns / gpu_ns : 0;
    if (analysis.samples > 0) {
      kernel.launches_per_sample = static_cast<double>(kernel.group->count) / analysis.samples;
    }
  }
  if (timed_gpus.size() > 1) {
    int64_t slowest_ns = -1;
    size_t slowest = 0;
    for (const int32_t gpu_id : timed_gpus) {
      GpuTimedWork work{.gpu_id = gpu_id, .kernel_ns = timed_ns_by_gpu[gpu_id]};
      for (const TimedKernel& kernel : analysis.timed_kernels) {
        if (kernel.group->gpu_id == gpu_id) work.launches += kernel.group->count;
      }
      if (work.kernel_ns > slowest_ns) {
        slowest_ns = work.kernel_ns;
        slowest = analysis.gpus.size();
      }
      analysis.gpus.push_back(work);
    }
    analysis.gpus[slowest].slowest = true;
    analysis.skews = LaunchSkews(analysis.timed_kernels, timed_gpus);
  }
  // One kernel on one GPU: the result's bytes and FLOPs per launch are that kernel's.
  std::string sole_kernel;
  if (analysis.timed_kernels.size() == 1) {
    sole_kernel = analysis.timed_kernels.front().group->name;
  } else if (analysis.timed_kernels.size() > 1) {
    analysis.achieved =
        Achieved(result, GpuOf(result, analysis.timed_kernels.front().group->gpu_id));
  }

  // Every workload kernel: metrics (borrowed from the profiling replay), stalls, roofline.
  absl::flat_hash_map<std::string, int64_t> kernel_ns_by_name;
  int64_t hotspot_ns = 0;
  for (const PhaseNode& node : timeline.phases) {
    for (const RecordGroup& group : node.groups) {
      if (!IsWorkloadKernel(group)) continue;
      analysis.kernel_time_ns += group.total_ns;
      kernel_ns_by_name[group.name] += group.total_ns;
      if (node.phase != api::PHASE_PROFILING && group.total_ns > hotspot_ns) {
        analysis.hotspot = &group;
        hotspot_ns = group.total_ns;
      }

      KernelFindings& findings = analysis.kernels[&group];
      findings.metrics = group.metrics;
      if (findings.metrics.empty()) {
        if (auto it = timeline.metrics_by_kernel.find(group.name);
            it != timeline.metrics_by_kernel.end()) {
          findings.metrics = it->second;
          findings.metrics_from_replay = true;
        }
      }
      findings.top_stalls = TopStalls(findings.metrics);
      findings.stall_samples = Metric(findings.metrics, kStallSampleCountMetric);
      KernelEvidence evidence{.median_us = group.median_ns() / 1e3, .metrics = findings.metrics};
      if (group.name == sole_kernel) {
        evidence.bytes_per_launch = static_cast<double>(result.measurement().bytes_moved());
        evidence.flops_per_launch = result.measurement().flops();
      }
      findings.classification = ClassifyKernel(evidence, GpuOf(result, group.gpu_id));
    }
  }
  if (analysis.hotspot != nullptr && analysis.kernel_time_ns > 0) {
    analysis.hotspot_group_pct = 100.0 * hotspot_ns / analysis.kernel_time_ns;
    analysis.hotspot_name_pct =
        100.0 * kernel_ns_by_name[analysis.hotspot->name] / analysis.kernel_time_ns;
  }
  return analysis;
}

}  // namespace gpuprof::report
