#include "report/execution_story.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/byte_format.h"
#include "common/enum_names.h"
#include "common/statistics.h"
#include "cupti/metric_names.h"

namespace gpuprof::report {
namespace {

using ::gpuprof::cupti::kAchievedOccupancyPct;
using ::gpuprof::cupti::kDefaultKernelMetrics;
using ::gpuprof::cupti::kDramThroughputPct;
using ::gpuprof::cupti::kL2HitRatePct;
using ::gpuprof::cupti::kSmThroughputPct;
using ::gpuprof::cupti::kStallMetricPrefix;
using ::gpuprof::cupti::kStallSampleCountMetric;
using ::gpuprof::cupti::kTensorPipePct;
using ::gpuprof::cupti::StallMetricName;

namespace api = ::gpuprof::v1;

// Below this both throughputs mean the kernel keeps neither DRAM nor the SMs busy.
constexpr double kLowThroughputPct = 40;
// A kernel this short spends much of its life launching and ramping up.
constexpr double kShortKernelUs = 3;
constexpr double kShortKernelThroughputPct = 60;
// Groups listed per phase before the rest are summed up in one line.
constexpr size_t kMaxGroupsPerPhase = 12;
constexpr size_t kMaxStallReasons = 4;

// Kernels the measurement core launches around the workload's own, which are not part of its
// performance (a spin-wait that holds the stream so launch latency is not timed).
bool IsMeasurementScaffolding(absl::string_view name) {
  return absl::StrContains(name, "StreamBlockerKernel");
}

std::string FormatNs(double ns) {
  if (ns < 1e3) return absl::StrFormat("%.0f ns", ns);
  if (ns < 1e4) return absl::StrFormat("%.2f us", ns / 1e3);
  if (ns < 1e6) return absl::StrFormat("%.1f us", ns / 1e3);
  if (ns < 1e9) return absl::StrFormat("%.3g ms", ns / 1e6);
  return absl::StrFormat("%.3g s", ns / 1e9);
}

std::string FormatOffset(int64_t ns) { return absl::StrFormat("+%.3f ms", ns / 1e6); }


std::string Percent(double value) { return absl::StrFormat("%.0f%%", value); }

std::optional<double> Metric(const absl::flat_hash_map<std::string, double>& metrics,
                             absl::string_view name) {
  const auto it = metrics.find(std::string(name));
  if (it == metrics.end()) return std::nullopt;
  return it->second;
}


// Records of one kind and name within a phase.
struct RecordGroup {
  api::ActivityRecord::Kind kind;
  std::string name;
  const api::ActivityRecord* first = nullptr;
  int64_t count = 0;
  // Of the records with timestamps (kernels replayed by the profiler have none).
  std::vector<int64_t> durations_ns;
  int64_t total_ns = 0;
  int64_t total_bytes = 0;
  absl::flat_hash_map<std::string, double> metrics;
};

struct PhaseNode {
  api::Phase phase = api::PHASE_UNSPECIFIED;
  // The marker's name when it says more than the phase ("profiling (kernel replay: ...)").
  std::string label;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool has_marker = false;
  std::vector<RecordGroup> groups;  // in order of first appearance
};

bool IsGpuWork(api::ActivityRecord::Kind kind) {
  return kind == api::ActivityRecord::KIND_KERNEL || kind == api::ActivityRecord::KIND_MEMCPY ||
         kind == api::ActivityRecord::KIND_MEMSET;
}

absl::flat_hash_map<std::string, double> MetricsOf(const api::ActivityRecord& record) {
  return absl::flat_hash_map<std::string, double>(record.metrics().begin(),
                                                  record.metrics().end());
}

const api::GpuInfo& GpuOf(const api::ExperimentResult& result, int32_t gpu_id) {
  for (const api::GpuInfo& gpu : result.provenance().gpus()) {
    if (gpu.index() == gpu_id) return gpu;
  }
  if (!result.provenance().gpus().empty()) return result.provenance().gpus(0);
  return api::GpuInfo::default_instance();
}

std::string LaunchLine(const api::ActivityRecord& kernel) {
  std::string line = absl::StrCat("launch: grid [", absl::StrJoin(kernel.grid(), ","),
                                  "] block [", absl::StrJoin(kernel.block(), ","), "], ",
                                  kernel.registers_per_thread(), " regs/thread");
  const int64_t shared = kernel.static_shared_memory() + kernel.dynamic_shared_memory();
  if (shared > 0) {
    absl::StrAppend(&line, ", shared memory ", FormatBinaryBytes(kernel.static_shared_memory()),
                    " static + ", FormatBinaryBytes(kernel.dynamic_shared_memory()), " dynamic");
  }
  return line;
}

std::string HardwareLine(const absl::flat_hash_map<std::string, double>& metrics) {
  static constexpr std::pair<absl::string_view, absl::string_view> kLabels[] = {
      {kDramThroughputPct, "DRAM"},
      {kSmThroughputPct, "SM"},
      {kAchievedOccupancyPct, "occupancy"},
      {kL2HitRatePct, "L2 hit"},
      {kTensorPipePct, "tensor pipe"},
  };
  std::vector<std::string> parts;
  for (const auto& [name, label] : kLabels) {
    if (auto value = Metric(metrics, name); value.has_value()) {
      parts.push_back(absl::StrCat(label, " ", Percent(*value)));
    }
  }
  // Extra metrics the request named, by their own names.
  std::map<std::string, double> extras;
  for (const auto& [name, value] : metrics) {
    if (absl::StartsWith(name, kStallMetricPrefix) || name == kStallSampleCountMetric) continue;
    if (std::none_of(std::begin(kLabels), std::end(kLabels),
                     [&](const auto& label) { return label.first == name; })) {
      extras[name] = value;
    }
  }
  for (const auto& [name, value] : extras) {
    parts.push_back(absl::StrFormat("%s %.4g", name, value));
  }
  return absl::StrJoin(parts, ", ");
}

std::string StallLine(const absl::flat_hash_map<std::string, double>& metrics) {
  std::vector<std::pair<double, std::string>> stalls;
  for (const auto& [name, value] : metrics) {
    if (absl::StartsWith(name, kStallMetricPrefix)) {
      stalls.push_back({value, name.substr(kStallMetricPrefix.size())});
    }
  }
  if (stalls.empty()) return "";
  std::sort(stalls.begin(), stalls.end(),
            [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  std::vector<std::string> parts;
  for (size_t i = 0; i < stalls.size() && i < kMaxStallReasons; ++i) {
    parts.push_back(absl::StrCat(stalls[i].second, " ", Percent(stalls[i].first)));
  }
  std::string line = absl::StrCat("warp stalls: ", absl::StrJoin(parts, ", "));
  if (auto samples = Metric(metrics, kStallSampleCountMetric); samples.has_value()) {
    absl::StrAppendFormat(&line, " (%.0f PC samples)", *samples);
  }
  return line;
}

// Appends "prefix + branch + text" lines of a tree; `last` picks the branch's shape.
class TreeWriter {
 public:
  explicit TreeWriter(std::string* out) : out_(out) {}
  void Line(absl::string_view indent, bool last, absl::string_view text) {
    absl::StrAppend(out_, indent, last ? "└── " : "├── ", text, "\n");
  }
  static std::string Child(absl::string_view indent, bool last) {
    return absl::StrCat(indent, last ? "    " : "│   ");
  }

 private:
  std::string* out_;
};

}  // namespace

std::string ShortKernelName(absl::string_view name) {
  absl::string_view text = name;
  if (absl::StartsWith(text, "void ")) text.remove_prefix(5);
  // Cut the parameter list: the first '(' outside template brackets.
  int depth = 0;
  size_t end = text.size();
  size_t name_start = 0;
  constexpr absl::string_view kAnonymous = "(anonymous namespace)";
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    // A namespace, not the parameter list.
    if (c == '(' && text.substr(i, kAnonymous.size()) == kAnonymous) {
      i += kAnonymous.size() - 1;
      continue;
    }
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (depth == 0 && c == '(' && i > 0) {
      end = i;
      break;
    }
    // The last namespace qualifier outside template arguments.
    if (depth == 0 && c == ':' && i + 1 < text.size() && text[i + 1] == ':') name_start = i + 2;
  }
  if (name_start > end) name_start = 0;
  return std::string(text.substr(name_start, end - name_start));
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
              absl::StrFormat("latency-bound: %s; at %.2f us, launch and ramp-up dominate",
                              figures, evidence.median_us)};
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

std::string RenderExecutionStory(absl::string_view experiment_id,
                                 const std::vector<api::ActivityRecord>& records,
                                 const api::ExperimentResult& result) {
  // Phases from their markers, in time order.
  std::vector<PhaseNode> phases;
  int64_t origin_ns = std::numeric_limits<int64_t>::max();
  for (const api::ActivityRecord& record : records) {
    if (record.start_ns() > 0) origin_ns = std::min(origin_ns, record.start_ns());
    if (record.kind() == api::ActivityRecord::KIND_PHASE) {
      phases.push_back(
          {record.phase(), record.name(), record.start_ns(), record.end_ns(), true, {}});
    }
  }
  if (origin_ns == std::numeric_limits<int64_t>::max()) origin_ns = 0;
  std::sort(phases.begin(), phases.end(),
            [](const PhaseNode& a, const PhaseNode& b) { return a.start_ns < b.start_ns; });

  // Metrics by kernel name, from whichever record carries them (the profiling replay's), so
  // that the timed launches of the same kernel can show them too.
  absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, double>> metrics_by_name;
  std::vector<const api::ActivityRecord*> ordered;
  for (const api::ActivityRecord& record : records) {
    if (record.kind() == api::ActivityRecord::KIND_PHASE) continue;
    ordered.push_back(&record);
    if (record.kind() == api::ActivityRecord::KIND_KERNEL && !record.metrics().empty()) {
      auto& metrics = metrics_by_name[record.name()];
      for (const auto& [name, value] : record.metrics()) metrics.emplace(name, value);
    }
  }
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto* a, const auto* b) {
    return a->start_ns() < b->start_ns();
  });

  // Each record into its phase: the marker of its phase that holds its start, else the first
  // marker of its phase, else a node made for it.
  int64_t overhead_ns = 0;
  int64_t overhead_records = 0;
  for (const api::ActivityRecord* record : ordered) {
    if (record->kind() == api::ActivityRecord::KIND_OVERHEAD) {
      overhead_ns += std::max<int64_t>(record->end_ns() - record->start_ns(), 0);
      ++overhead_records;
      continue;
    }
    PhaseNode* node = nullptr;
    for (PhaseNode& candidate : phases) {
      if (candidate.phase != record->phase()) continue;
      if (node == nullptr) node = &candidate;
      if (record->start_ns() >= candidate.start_ns && record->start_ns() < candidate.end_ns) {
        node = &candidate;
        break;
      }
    }
    if (node == nullptr) {
      phases.push_back({record->phase(), "", record->start_ns(), record->end_ns(), false, {}});
      node = &phases.back();
    }
    if (!node->has_marker) {
      node->start_ns = std::min(node->start_ns, record->start_ns());
      node->end_ns = std::max(node->end_ns, record->end_ns());
    }
    auto group = std::find_if(node->groups.begin(), node->groups.end(), [&](const RecordGroup& g) {
      return g.kind == record->kind() && g.name == record->name();
    });
    if (group == node->groups.end()) {
      node->groups.push_back({record->kind(), record->name(), record, 0, {}, 0, 0, {}});
      group = std::prev(node->groups.end());
    }
    ++group->count;
    const int64_t duration = std::max<int64_t>(record->end_ns() - record->start_ns(), 0);
    if (record->start_ns() > 0) group->durations_ns.push_back(duration);
    group->total_ns += duration;
    group->total_bytes += record->bytes();
    if (group->metrics.empty() && !record->metrics().empty()) group->metrics = MetricsOf(*record);
  }
  std::stable_sort(phases.begin(), phases.end(),
                   [](const PhaseNode& a, const PhaseNode& b) { return a.start_ns < b.start_ns; });

  // The workload's own kernel: the one non-scaffolding kernel of the timed phase, if it is
  // alone (the result's bytes and FLOPs per launch describe it).
  std::string main_kernel;
  int64_t kernel_time_ns = 0;
  const RecordGroup* hotspot = nullptr;
  int64_t hotspot_ns = 0;
  absl::flat_hash_map<std::string, int64_t> kernel_total_by_name;
  for (const PhaseNode& node : phases) {
    std::vector<std::string> timed_kernels;
    for (const RecordGroup& group : node.groups) {
      if (group.kind != api::ActivityRecord::KIND_KERNEL || IsMeasurementScaffolding(group.name)) {
        continue;
      }
      kernel_time_ns += group.total_ns;
      kernel_total_by_name[group.name] += group.total_ns;
      if (node.phase == api::PHASE_TIMED) timed_kernels.push_back(group.name);
      if (node.phase != api::PHASE_PROFILING && group.total_ns > hotspot_ns) {
        hotspot = &group;
        hotspot_ns = group.total_ns;
      }
    }
    if (node.phase == api::PHASE_TIMED && timed_kernels.size() == 1) main_kernel = timed_kernels[0];
  }

  std::string out;
  const api::GpuInfo& first_gpu = GpuOf(result, records.empty() ? 0 : records.front().gpu_id());
  absl::StrAppend(&out, "EXECUTION STORY of ", experiment_id);
  if (!first_gpu.name().empty()) {
    absl::StrAppend(&out, " on GPU ", first_gpu.index(), " (", first_gpu.name(), ")");
  }
  absl::StrAppend(&out, "\n");
  if (first_gpu.spec_peak_bandwidth_gbps() > 0) {
    absl::StrAppendFormat(&out, "roofline: %.0f GB/s spec peak memory bandwidth",
                          first_gpu.spec_peak_bandwidth_gbps());
    if (first_gpu.spec_peak_bf16_tflops() > 0) {
      absl::StrAppendFormat(&out, ", %.0f TFLOP/s bf16 (ridge at %.0f FLOP/byte)",
                            first_gpu.spec_peak_bf16_tflops(),
                            first_gpu.spec_peak_bf16_tflops() * 1e3 /
                                first_gpu.spec_peak_bandwidth_gbps());
    }
    if (first_gpu.measured_copy_bandwidth_gbps() > 0) {
      absl::StrAppendFormat(&out, "; measured copy %.0f GB/s",
                            first_gpu.measured_copy_bandwidth_gbps());
    }
    absl::StrAppend(&out, "\n");
  }
  if (records.empty()) {
    absl::StrAppend(&out, "no activity records: the experiment ran with tracing off, or before "
                          "any GPU work\n");
  } else {
    absl::StrAppend(&out, "Time 0.000 ms: first record\n");
  }

  TreeWriter tree(&out);
  for (size_t p = 0; p < phases.size(); ++p) {
    const PhaseNode& node = phases[p];
    const bool last_phase = p + 1 == phases.size();
    int64_t gpu_ns = 0;
    for (const RecordGroup& group : node.groups) {
      if (IsGpuWork(group.kind)) gpu_ns += group.total_ns;
    }
    std::string name =
        node.phase == api::PHASE_UNSPECIFIED ? "outside any phase" : EnumShortName(node.phase);
    if (absl::StartsWith(node.label, name) && node.label.size() > name.size()) name = node.label;
    std::string heading = absl::StrCat(name, "  ",
        FormatOffset(node.start_ns - origin_ns), "  ", FormatNs(node.end_ns - node.start_ns));
    absl::StrAppend(&heading, gpu_ns > 0 ? absl::StrCat("  (GPU busy ", FormatNs(gpu_ns), ")")
                                         : "  (no GPU work)");
    tree.Line("", last_phase, heading);
    const std::string phase_indent = TreeWriter::Child("", last_phase);

    // Biggest groups first when there are too many to list.
    std::vector<const RecordGroup*> shown;
    for (const RecordGroup& group : node.groups) shown.push_back(&group);
    int64_t hidden_ns = 0;
    size_t hidden = 0;
    if (shown.size() > kMaxGroupsPerPhase) {
      std::vector<const RecordGroup*> by_time = shown;
      std::stable_sort(by_time.begin(), by_time.end(),
                       [](const auto* a, const auto* b) { return a->total_ns > b->total_ns; });
      for (size_t i = kMaxGroupsPerPhase; i < by_time.size(); ++i) {
        hidden_ns += by_time[i]->total_ns;
        ++hidden;
      }
      by_time.resize(kMaxGroupsPerPhase);
      std::erase_if(shown, [&](const RecordGroup* g) {
        return std::find(by_time.begin(), by_time.end(), g) == by_time.end();
      });
    }
    for (size_t g = 0; g < shown.size(); ++g) {
      const RecordGroup& group = *shown[g];
      const bool last_group = g + 1 == shown.size() && hidden == 0;
      const int64_t count = group.count;
      const double median_ns = Median(std::vector<double>(group.durations_ns.begin(), group.durations_ns.end()));
      const bool timed = !group.durations_ns.empty();
      std::string line;
      switch (group.kind) {
        case api::ActivityRecord::KIND_KERNEL:
          line = ShortKernelName(group.name);
          break;
        case api::ActivityRecord::KIND_SYNCHRONIZATION:
          line = absl::StrCat("CPU waits: ", group.name);
          break;
        default:
          line = group.name;
      }
      if (!timed) {
        absl::StrAppend(&line, count > 1 ? absl::StrCat(" x ", count) : "",
                        "  (no timestamps: replayed by the profiler)");
      } else if (count > 1) {
        absl::StrAppend(&line, " x ", count, ", median ", FormatNs(median_ns), ", total ",
                        FormatNs(group.total_ns));
      } else {
        absl::StrAppend(&line, "  ", FormatNs(group.total_ns));
      }
      if (group.first->start_ns() > 0) {
        absl::StrAppend(&line, "  @ ", FormatOffset(group.first->start_ns() - origin_ns));
      }
      if (group.total_bytes > 0) {
        absl::StrAppend(&line, ", ", FormatBinaryBytes(group.total_bytes));
        if (group.total_ns > 0) {
          absl::StrAppendFormat(&line, " at %.1f GB/s",
                                static_cast<double>(group.total_bytes) / group.total_ns);
        }
      }
      if (&group == hotspot && kernel_time_ns > 0) {
        absl::StrAppend(&line, "  <- HOTSPOT (", Percent(100.0 * hotspot_ns / kernel_time_ns),
                        " of kernel time)");
      }
      tree.Line(phase_indent, last_group, line);
      if (group.kind != api::ActivityRecord::KIND_KERNEL) continue;

      const std::string kernel_indent = TreeWriter::Child(phase_indent, last_group);
      std::vector<std::string> details;
      details.push_back(LaunchLine(*group.first));
      if (IsMeasurementScaffolding(group.name)) {
        details.push_back(
            "measurement scaffolding: holds the stream so that launch latency is not timed; "
            "its time is waiting, not work");
      } else {
        absl::flat_hash_map<std::string, double> metrics = group.metrics;
        bool borrowed = false;
        if (metrics.empty()) {
          if (auto it = metrics_by_name.find(group.name); it != metrics_by_name.end()) {
            metrics = it->second;
            borrowed = true;
          }
        }
        if (const std::string hardware = HardwareLine(metrics); !hardware.empty()) {
          details.push_back(absl::StrCat("hardware", borrowed ? " (profiling replay)" : "", ": ",
                                         hardware));
        }
        if (const std::string stalls = StallLine(metrics); !stalls.empty()) {
          details.push_back(stalls);
        }
        KernelEvidence evidence;
        evidence.median_us = median_ns / 1e3;
        evidence.metrics = metrics;
        if (group.name == main_kernel) {
          evidence.bytes_per_launch = static_cast<double>(result.measurement().bytes_moved());
          evidence.flops_per_launch = result.measurement().flops();
        }
        details.push_back(
            ClassifyKernel(evidence, GpuOf(result, group.first->gpu_id())).explanation);
      }
      for (size_t d = 0; d < details.size(); ++d) {
        tree.Line(kernel_indent, d + 1 == details.size(), details[d]);
      }
    }
    if (hidden > 0) {
      tree.Line(phase_indent, true,
                absl::StrCat("... ", hidden, " more, total ", FormatNs(hidden_ns)));
    }
  }

  // The whole run in a few numbers.
  if (!records.empty()) {
    absl::StrAppend(&out, "Kernel time: ", FormatNs(kernel_time_ns));
    if (hotspot != nullptr && kernel_time_ns > 0) {
      absl::StrAppend(&out, "; hotspot ", ShortKernelName(hotspot->name), " (",
                      Percent(100.0 * kernel_total_by_name[hotspot->name] / kernel_time_ns), ")");
    }
    absl::StrAppend(&out, "\n");
  }
  if (overhead_records > 0) {
    absl::StrAppend(&out, "CUPTI overhead: ", overhead_records, " records, ", FormatNs(overhead_ns),
                    "\n");
  }
  if (result.dropped_activity_records() > 0) {
    absl::StrAppend(&out, "Dropped: ", result.dropped_activity_records(),
                    " activity records (CUPTI buffers were full); the story above misses them\n");
  }
  if (!result.not_collected().empty()) {
    absl::StrAppend(&out, "Not collected:\n");
    for (const std::string& line : result.not_collected()) {
      absl::StrAppend(&out, "  - ", line, "\n");
    }
  }
  return out;
}

}  // namespace gpuprof::report
