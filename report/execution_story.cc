#include "report/execution_story.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/byte_format.h"
#include "common/enum_names.h"
#include "cupti/metric_names.h"

namespace gpuprof::report {
namespace {

using ::gpuprof::cupti::kAchievedOccupancyPct;
using ::gpuprof::cupti::kDramThroughputPct;
using ::gpuprof::cupti::kL2HitRatePct;
using ::gpuprof::cupti::kSmThroughputPct;
using ::gpuprof::cupti::kStallMetricPrefix;
using ::gpuprof::cupti::kStallSampleCountMetric;
using ::gpuprof::cupti::kTensorPipePct;

namespace api = ::gpuprof::v1;

// Groups listed per phase (and GPU) before the rest are summed up in one line.
constexpr size_t kMaxGroupsPerPhase = 12;

std::string FormatNs(double ns) {
  if (ns < 1e3) return absl::StrFormat("%.0f ns", ns);
  if (ns < 1e4) return absl::StrFormat("%.2f us", ns / 1e3);
  if (ns < 1e6) return absl::StrFormat("%.1f us", ns / 1e3);
  if (ns < 1e9) return absl::StrFormat("%.3g ms", ns / 1e6);
  return absl::StrFormat("%.3g s", ns / 1e9);
}

std::string FormatOffset(int64_t ns) { return absl::StrFormat("+%.3f ms", ns / 1e6); }

std::string Percent(double value) { return absl::StrFormat("%.0f%%", value); }

std::optional<double> Metric(const MetricMap& metrics, absl::string_view name) {
  const auto it = metrics.find(std::string(name));
  if (it == metrics.end()) return std::nullopt;
  return it->second;
}

std::string LaunchLine(const api::ActivityRecord& kernel) {
  std::string line = absl::StrCat("launch: grid [", absl::StrJoin(kernel.grid(), ","), "] block [",
                                  absl::StrJoin(kernel.block(), ","), "], ",
                                  kernel.registers_per_thread(), " regs/thread");
  const int64_t shared = kernel.static_shared_memory() + kernel.dynamic_shared_memory();
  if (shared > 0) {
    absl::StrAppend(&line, ", shared memory ", FormatBinaryBytes(kernel.static_shared_memory()),
                    " static + ", FormatBinaryBytes(kernel.dynamic_shared_memory()), " dynamic");
  }
  return line;
}

std::string HardwareLine(const MetricMap& metrics) {
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
  for (const auto& metric : metrics) {
    const std::string& name = metric.first;
    if (absl::StartsWith(name, kStallMetricPrefix) || name == kStallSampleCountMetric) continue;
    if (std::none_of(std::begin(kLabels), std::end(kLabels),
                     [&](const auto& label) { return label.first == name; })) {
      extras[name] = metric.second;
    }
  }
  for (const auto& [name, value] : extras) {
    parts.push_back(absl::StrFormat("%s %.4g", name, value));
  }
  return absl::StrJoin(parts, ", ");
}

std::string StallLine(const KernelFindings& findings) {
  if (findings.top_stalls.empty()) return "";
  std::vector<std::string> parts;
  for (const auto& [reason, percent] : findings.top_stalls) {
    parts.push_back(absl::StrCat(reason, " ", Percent(percent)));
  }
  std::string line = absl::StrCat("warp stalls: ", absl::StrJoin(parts, ", "));
  if (findings.stall_samples.has_value()) {
    absl::StrAppendFormat(&line, " (%.0f PC samples)", *findings.stall_samples);
  }
  return line;
}

std::string GpuLabel(const api::ExperimentResult& result, int32_t gpu_id) {
  const api::GpuInfo& gpu = GpuOf(result, gpu_id);
  if (gpu.name().empty()) return absl::StrCat("GPU ", gpu_id);
  return absl::StrCat("GPU ", gpu_id, " (", gpu.name(), ")");
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

// The story's text, piece by piece.
class StoryWriter {
 public:
  StoryWriter(const StoryTimeline& timeline, const StoryAnalysis& analysis,
              const api::ExperimentResult& result, std::string* out)
      : timeline_(timeline), analysis_(analysis), result_(result), out_(out), tree_(out) {}

  void Heading(absl::string_view experiment_id);
  void Phases();
  void Summary();

 private:
  void Groups(absl::string_view indent, std::vector<const RecordGroup*> groups);
  void Group(absl::string_view indent, bool last, const RecordGroup& group);
  void SampleLines();
  void GpuLines();

  const StoryTimeline& timeline_;
  const StoryAnalysis& analysis_;
  const api::ExperimentResult& result_;
  std::string* out_;
  TreeWriter tree_;
};

void StoryWriter::Heading(absl::string_view experiment_id) {
  const api::GpuInfo& first_gpu =
      GpuOf(result_, timeline_.gpu_ids.empty() ? 0 : timeline_.gpu_ids.front());
  absl::StrAppend(out_, "EXECUTION STORY of ", experiment_id);
  if (timeline_.multi_gpu()) {
    std::vector<std::string> gpus;
    for (const int32_t gpu_id : timeline_.gpu_ids) gpus.push_back(GpuLabel(result_, gpu_id));
    absl::StrAppend(out_, " on ", absl::StrJoin(gpus, ", "));
  } else if (!first_gpu.name().empty()) {
    absl::StrAppend(out_, " on GPU ", first_gpu.index(), " (", first_gpu.name(), ")");
  }
  absl::StrAppend(out_, "\n");
  if (first_gpu.spec_peak_bandwidth_gbps() > 0) {
    absl::StrAppendFormat(out_, "roofline: %.0f GB/s spec peak memory bandwidth",
                          first_gpu.spec_peak_bandwidth_gbps());
    if (first_gpu.spec_peak_bf16_tflops() > 0) {
      absl::StrAppendFormat(
          out_, ", %.0f TFLOP/s bf16 (ridge at %.0f FLOP/byte)", first_gpu.spec_peak_bf16_tflops(),
          first_gpu.spec_peak_bf16_tflops() * 1e3 / first_gpu.spec_peak_bandwidth_gbps());
    }
    if (first_gpu.measured_copy_bandwidth_gbps() > 0) {
      absl::StrAppendFormat(out_, "; measured copy %.0f GB/s",
                            first_gpu.measured_copy_bandwidth_gbps());
    }
    absl::StrAppend(out_, "\n");
  }
  if (timeline_.empty) {
    absl::StrAppend(out_,
                    "no activity records: the experiment ran with tracing off, or before "
                    "any GPU work\n");
  } else {
    absl::StrAppend(out_, "Time 0.000 ms: first record\n");
  }
}

void StoryWriter::Phases() {
  for (size_t p = 0; p < timeline_.phases.size(); ++p) {
    const PhaseNode& node = timeline_.phases[p];
    const bool last_phase = p + 1 == timeline_.phases.size();
    const int64_t gpu_ns = node.GpuBusyNs();
    std::string name =
        node.phase == api::PHASE_UNSPECIFIED ? "outside any phase" : EnumShortName(node.phase);
    if (absl::StartsWith(node.label, name) && node.label.size() > name.size()) name = node.label;
    std::string heading =
        absl::StrCat(name, "  ", FormatOffset(node.start_ns - timeline_.origin_ns), "  ",
                     FormatNs(node.end_ns - node.start_ns));
    absl::StrAppend(&heading, gpu_ns > 0 ? absl::StrCat("  (GPU busy ", FormatNs(gpu_ns), ")")
                                         : "  (no GPU work)");
    tree_.Line("", last_phase, heading);
    const std::string phase_indent = TreeWriter::Child("", last_phase);

    if (!timeline_.multi_gpu()) {
      std::vector<const RecordGroup*> groups;
      for (const RecordGroup& group : node.groups) groups.push_back(&group);
      Groups(phase_indent, std::move(groups));
      continue;
    }
    // Several GPUs: one node each, so that every rank's kernels read apart.
    const std::vector<int32_t> gpu_ids = node.GpuIds();
    for (size_t g = 0; g < gpu_ids.size(); ++g) {
      const bool last_gpu = g + 1 == gpu_ids.size();
      const int64_t busy_ns = node.GpuBusyNs(gpu_ids[g]);
      tree_.Line(phase_indent, last_gpu,
                 absl::StrCat(GpuLabel(result_, gpu_ids[g]),
                              busy_ns > 0 ? absl::StrCat("  (GPU busy ", FormatNs(busy_ns), ")")
                                          : "  (no GPU work)"));
      std::vector<const RecordGroup*> groups;
      for (const RecordGroup& group : node.groups) {
        if (group.gpu_id == gpu_ids[g]) groups.push_back(&group);
      }
      Groups(TreeWriter::Child(phase_indent, last_gpu), std::move(groups));
    }
  }
}

void StoryWriter::Groups(absl::string_view indent, std::vector<const RecordGroup*> shown) {
  // Biggest groups first when there are too many to list.
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
    Group(indent, g + 1 == shown.size() && hidden == 0, *shown[g]);
  }
  if (hidden > 0) {
    tree_.Line(indent, true, absl::StrCat("... ", hidden, " more, total ", FormatNs(hidden_ns)));
  }
}

void StoryWriter::Group(absl::string_view indent, bool last, const RecordGroup& group) {
  const double median_ns = group.median_ns();
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
  if (group.durations_ns.empty()) {
    absl::StrAppend(&line, group.count > 1 ? absl::StrCat(" x ", group.count) : "",
                    "  (no timestamps: replayed by the profiler)");
  } else if (group.count > 1) {
    absl::StrAppend(&line, " x ", group.count, ", median ", FormatNs(median_ns), ", total ",
                    FormatNs(group.total_ns));
  } else {
    absl::StrAppend(&line, "  ", FormatNs(group.total_ns));
  }
  if (group.first->start_ns() > 0) {
    absl::StrAppend(&line, "  @ ", FormatOffset(group.first->start_ns() - timeline_.origin_ns));
  }
  if (group.total_bytes > 0) {
    absl::StrAppend(&line, ", ", FormatBinaryBytes(group.total_bytes));
    if (group.total_ns > 0) {
      absl::StrAppendFormat(&line, " at %.1f GB/s",
                            static_cast<double>(group.total_bytes) / group.total_ns);
    }
  }
  if (group.scaffolding && !group.is_kernel()) {
    absl::StrAppend(&line, "  (measurement scaffolding: the cold-L2 flush)");
  }
  if (&group == analysis_.hotspot && analysis_.kernel_time_ns > 0) {
    absl::StrAppend(&line, "  <- HOTSPOT (", Percent(analysis_.hotspot_group_pct),
                    " of kernel time)");
  }
  tree_.Line(indent, last, line);
  if (!group.is_kernel()) return;

  const std::string kernel_indent = TreeWriter::Child(indent, last);
  std::vector<std::string> details;
  details.push_back(LaunchLine(*group.first));
  if (group.scaffolding) {
    details.push_back(
        "measurement scaffolding: holds the stream so that launch latency is not timed; "
        "its time is waiting, not work");
  } else if (const auto found = analysis_.kernels.find(&group); found != analysis_.kernels.end()) {
    const KernelFindings& findings = found->second;
    if (const std::string hardware = HardwareLine(findings.metrics); !hardware.empty()) {
      details.push_back(absl::StrCat(
          "hardware", findings.metrics_from_replay ? " (profiling replay)" : "", ": ", hardware));
    }
    if (const std::string stalls = StallLine(findings); !stalls.empty()) {
      details.push_back(stalls);
    }
    details.push_back(findings.classification.explanation);
  }
  for (size_t d = 0; d < details.size(); ++d) {
    tree_.Line(kernel_indent, d + 1 == details.size(), details[d]);
  }
}

void StoryWriter::Summary() {
  if (!timeline_.empty) {
    absl::StrAppend(out_, "Kernel time: ", FormatNs(analysis_.kernel_time_ns));
    if (analysis_.hotspot != nullptr && analysis_.kernel_time_ns > 0) {
      absl::StrAppend(out_, "; hotspot ", ShortKernelName(analysis_.hotspot->name), " (",
                      Percent(analysis_.hotspot_name_pct), ")");
    }
    absl::StrAppend(out_, "\n");
  }
  SampleLines();
  GpuLines();
  if (timeline_.overhead_records > 0) {
    absl::StrAppend(out_, "CUPTI overhead: ", timeline_.overhead_records, " records, ",
                    FormatNs(timeline_.overhead_ns), "\n");
  }
  if (result_.dropped_activity_records() > 0) {
    absl::StrAppend(out_, "Dropped: ", result_.dropped_activity_records(),
                    " activity records (CUPTI buffers were full); the story above misses them\n");
  }
  if (!result_.not_collected().empty()) {
    absl::StrAppend(out_, "Not collected:\n");
    for (const std::string& line : result_.not_collected()) {
      absl::StrAppend(out_, "  - ", line, "\n");
    }
  }
}

// A sample made of several kernel groups: each one's part, then the result against the roof.
void StoryWriter::SampleLines() {
  if (!analysis_.achieved.has_value()) return;
  absl::StrAppend(out_, "Per sample (timed",
                  analysis_.samples > 0 ? absl::StrCat(", ", analysis_.samples, " samples") : "",
                  "): ", analysis_.timed_kernels.size(), " workload kernels\n");
  for (const TimedKernel& kernel : analysis_.timed_kernels) {
    const RecordGroup& group = *kernel.group;
    std::string line =
        absl::StrCat("  ", timeline_.multi_gpu() ? absl::StrCat("GPU ", group.gpu_id, ": ") : "",
                     ShortKernelName(group.name));
    if (kernel.launches_per_sample > 0) {
      absl::StrAppendFormat(&line, " x %.3g per sample", kernel.launches_per_sample);
    } else {
      absl::StrAppend(&line, " x ", group.count);
    }
    absl::StrAppend(&line, ", median ", FormatNs(group.median_ns()), ", ",
                    Percent(kernel.share_pct), " of the ",
                    timeline_.multi_gpu() ? "GPU's" : "sample's", " kernel time\n");
    absl::StrAppend(out_, line);
  }
  const AchievedFigures& achieved = *analysis_.achieved;
  if (achieved.median_us <= 0) return;
  std::vector<std::string> figures = {
      absl::StrFormat("median %s", FormatNs(achieved.median_us * 1e3))};
  if (achieved.bandwidth_gbps > 0) {
    std::string bandwidth =
        absl::StrFormat("%.0f GB/s (bytes read + written)", achieved.bandwidth_gbps);
    if (achieved.pct_of_spec_peak_bandwidth > 0) {
      absl::StrAppend(&bandwidth, " = ", Percent(achieved.pct_of_spec_peak_bandwidth),
                      " of spec peak");
    }
    if (achieved.pct_of_measured_copy_bandwidth > 0) {
      absl::StrAppend(&bandwidth, ", ", Percent(achieved.pct_of_measured_copy_bandwidth),
                      " of measured copy");
    }
    figures.push_back(bandwidth);
  }
  if (achieved.tflops > 0) {
    std::string flops = absl::StrFormat("%.1f TFLOP/s", achieved.tflops);
    if (achieved.pct_of_spec_peak_flops > 0) {
      absl::StrAppend(&flops, " = ", Percent(achieved.pct_of_spec_peak_flops), " of spec peak");
    }
    figures.push_back(flops);
  }
  absl::StrAppend(out_, "  result per sample: ", absl::StrJoin(figures, "; "), "\n");
  absl::StrAppend(out_, "  the sample as a whole: ", achieved.classification.explanation, "\n");
}

void StoryWriter::GpuLines() {
  if (analysis_.gpus.empty()) return;
  int64_t fastest_ns = analysis_.gpus.front().kernel_ns;
  for (const GpuTimedWork& work : analysis_.gpus) fastest_ns = std::min(fastest_ns, work.kernel_ns);
  absl::StrAppend(out_, "Per GPU (workload kernel time in the timed phase):\n");
  for (const GpuTimedWork& work : analysis_.gpus) {
    absl::StrAppend(out_, "  ", GpuLabel(result_, work.gpu_id), ": ", FormatNs(work.kernel_ns),
                    " over ", work.launches, " launches");
    if (work.slowest) {
      absl::StrAppend(out_, "  <- slowest");
      if (fastest_ns > 0 && work.kernel_ns > fastest_ns) {
        absl::StrAppend(out_, " (", Percent(100.0 * (work.kernel_ns - fastest_ns) / fastest_ns),
                        " over the fastest)");
      }
    }
    absl::StrAppend(out_, "\n");
  }
  for (const LaunchSkew& skew : analysis_.skews) {
    absl::StrAppend(
        out_, "  ", ShortKernelName(skew.kernel), ": the GPUs start each of its ", skew.launches,
        " launches within ", FormatNs(static_cast<int64_t>(skew.median_ns)),
        " of each other (median), at most ", FormatNs(skew.max_ns),
        skew.latest_gpu.has_value()
            ? absl::StrCat("; ", GpuLabel(result_, *skew.latest_gpu), " is most often the last")
            : std::string(),
        "\n");
  }
}

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

std::string RenderExecutionStory(absl::string_view experiment_id, const StoryTimeline& timeline,
                                 const StoryAnalysis& analysis,
                                 const api::ExperimentResult& result) {
  std::string out;
  StoryWriter writer(timeline, analysis, result, &out);
  writer.Heading(experiment_id);
  writer.Phases();
  writer.Summary();
  return out;
}

std::string RenderExecutionStory(absl::string_view experiment_id,
                                 const std::vector<api::ActivityRecord>& records,
                                 const api::ExperimentResult& result) {
  const StoryTimeline timeline = BuildStoryTimeline(records);
  const StoryAnalysis analysis = AnalyseStory(timeline, result);
  return RenderExecutionStory(experiment_id, timeline, analysis, result);
}

}  // namespace gpuprof::report
