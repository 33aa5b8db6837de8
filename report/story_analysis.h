// The second step of the execution story: what the timeline means. Which kernels are the
// workload's (every kernel of the timed phase the measurement core did not launch, e.g. a
// split-K main kernel and its merge kernel), each one's share of a sample; one line per GPU
// when the records come from several, with the slowest named; the result's bandwidth and
// FLOP/s against the GPU's limits; the roofline class of each kernel and its warp stalls.
// Pure; rendering is execution_story's business.
#ifndef GPUPROF_REPORT_STORY_ANALYSIS_H_
#define GPUPROF_REPORT_STORY_ANALYSIS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/gpus.pb.h"
#include "report/story_timeline.h"

namespace gpuprof::report {

enum class Boundedness { kUnknown, kMemory, kCompute, kLatency };

struct KernelClassification {
  Boundedness bound = Boundedness::kUnknown;
  // One line: "memory-bound: DRAM 91% of peak, SM 22%".
  std::string explanation;
};

// What the classification looks at for one kernel.
struct KernelEvidence {
  double median_us = 0;
  // Profiler metrics by name (see metric_names.h); may be empty.
  MetricMap metrics;
  // Per launch, from the workload's own accounting; 0 when unknown.
  double bytes_per_launch = 0;
  double flops_per_launch = 0;
};

// Where the kernel sits against the roofline of `gpu`:
// - with DRAM and SM throughput metrics: latency-bound when both are below 40% (or below 60%
//   for a kernel shorter than 3 us), else memory- or compute-bound by the higher one;
// - with bytes (and FLOPs) per launch and the GPU's spec peaks: the side of the ridge point
//   its arithmetic intensity falls on, latency-bound when it reaches under 40% of that roof;
// - else latency-bound when shorter than 3 us; otherwise unknown, saying what is missing.
KernelClassification ClassifyKernel(const KernelEvidence& evidence,
                                    const gpuprof::v1::GpuInfo& gpu);

// What a workload kernel group shows beyond its times.
struct KernelFindings {
  // The group's metrics, or the profiling replay's of the same kernel when it has none.
  MetricMap metrics;
  bool metrics_from_replay = false;
  // Stall reasons (percent of samples), biggest first, at most a few.
  std::vector<std::pair<std::string, double>> top_stalls;
  std::optional<double> stall_samples;
  KernelClassification classification;
};

// A workload kernel of the timed phase, on one GPU.
struct TimedKernel {
  const RecordGroup* group = nullptr;
  // 0 when the number of samples is unknown.
  double launches_per_sample = 0;
  // Of the workload's kernel time on the same GPU in the timed phase, 0-100.
  double share_pct = 0;
};

// One GPU's workload kernels in the timed phase.
struct GpuTimedWork {
  int32_t gpu_id = 0;
  int64_t kernel_ns = 0;
  int64_t launches = 0;
  bool slowest = false;
};

// The result's figures for one unit of work, against the GPU's limits.
struct AchievedFigures {
  double median_us = 0;
  double bandwidth_gbps = 0;
  double pct_of_spec_peak_bandwidth = 0;
  double pct_of_measured_copy_bandwidth = 0;
  double tflops = 0;
  double pct_of_spec_peak_flops = 0;
  // Of the unit as a whole, from its bytes and FLOPs.
  KernelClassification classification;
};

// How far apart the GPUs start the same kernel: for a kernel the timed phase launched equally
// often on every GPU (NCCL ranks' collectives), the spread of the i-th launch's start times
// across the GPUs, which is the time ranks wait on each other.
struct LaunchSkew {
  std::string kernel;
  int64_t launches = 0;  // per GPU
  double median_ns = 0;
  int64_t max_ns = 0;
  // The GPU that most often started last; unset when the GPUs always started together.
  std::optional<int32_t> latest_gpu;
};

struct StoryAnalysis {
  // Of every workload kernel group (scaffolding has none).
  absl::flat_hash_map<const RecordGroup*, KernelFindings> kernels;
  // Of the timed phase, by GPU, in order of first appearance.
  std::vector<TimedKernel> timed_kernels;
  // Samples seen in the timed phase (stream blocker launches on one GPU), else the result's
  // count; 0 when unknown.
  int64_t samples = 0;
  // One per GPU, only when the timed phase ran on more than one.
  std::vector<GpuTimedWork> gpus;
  // Only when the timed phase ran on more than one GPU.
  std::vector<LaunchSkew> skews;
  // When a sample is more than one kernel group (several kernels, or several GPUs): the result
  // describes the sample, not any one kernel.
  std::optional<AchievedFigures> achieved;

  // Workload kernel time over every phase, and the group that took most of it (outside the
  // profiling replay); its share as a group and with every group of its name.
  int64_t kernel_time_ns = 0;
  const RecordGroup* hotspot = nullptr;
  double hotspot_group_pct = 0;
  double hotspot_name_pct = 0;

  bool multi_kernel_sample() const { return achieved.has_value(); }
};

// The GPU of `gpu_id` in the result's provenance, else its first GPU, else an empty one.
const gpuprof::v1::GpuInfo& GpuOf(const gpuprof::v1::ExperimentResult& result, int32_t gpu_id);

// Analyses `timeline`, which must outlive the analysis (it points into its groups). `result`
// gives the GPUs' limits and the bytes and FLOPs of a unit of work.
StoryAnalysis AnalyseStory(const StoryTimeline& timeline,
                           const gpuprof::v1::ExperimentResult& result);

}  // namespace gpuprof::report

#endif  // GPUPROF_REPORT_STORY_ANALYSIS_H_
