// The first step of the execution story: activity records -> a timeline model. Phases in time
// order (from their markers, or made up from the records when a marker is missing); in each,
// the records grouped by GPU, kind, name and whether the measurement core launched them, with
// counts, durations and bytes. Pure; what the groups mean is story_analysis's business.
#ifndef GPUPROF_REPORT_STORY_TIMELINE_H_
#define GPUPROF_REPORT_STORY_TIMELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::report {

using MetricMap = absl::flat_hash_map<std::string, double>;

// Records of one kind and name within a phase, on one GPU.
struct RecordGroup {
  gpuprof::v1::ActivityRecord::Kind kind = gpuprof::v1::ActivityRecord::KIND_UNSPECIFIED;
  std::string name;
  int32_t gpu_id = 0;
  // Launched by the measurement core (the records' flag), not by the workload.
  bool scaffolding = false;
  // The first record in time, for the launch configuration and the offset.
  const gpuprof::v1::ActivityRecord* first = nullptr;
  int64_t count = 0;
  // Of the records with timestamps (kernels replayed by the profiler have none), in the order
  // the records came.
  std::vector<int64_t> durations_ns;
  std::vector<int64_t> starts_ns;
  int64_t total_ns = 0;
  int64_t total_bytes = 0;
  // The first record's that has any.
  MetricMap metrics;

  bool is_kernel() const { return kind == gpuprof::v1::ActivityRecord::KIND_KERNEL; }
  // Work the GPU did: kernels, copies, memsets (not waits or markers).
  bool is_gpu_work() const;
  double median_ns() const;
};

struct PhaseNode {
  gpuprof::v1::Phase phase = gpuprof::v1::PHASE_UNSPECIFIED;
  // The marker's name when it says more than the phase ("profiling (kernel replay: ...)").
  std::string label;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool has_marker = false;
  // In order of first appearance.
  std::vector<RecordGroup> groups;

  // GPU work of the phase: of every GPU, or of `gpu_id` only.
  int64_t GpuBusyNs() const;
  int64_t GpuBusyNs(int32_t gpu_id) const;
  // The GPUs that have groups in this phase, in order of first appearance.
  std::vector<int32_t> GpuIds() const;
};

struct StoryTimeline {
  // The first timestamp of any record: offsets are told from it.
  int64_t origin_ns = 0;
  // In time order.
  std::vector<PhaseNode> phases;
  // The GPUs with any record of GPU work, ascending.
  std::vector<int32_t> gpu_ids;
  // Metrics by kernel name, merged from whichever records carry them (the profiling replay's),
  // so that the timed launches of the same kernel can show them too.
  absl::flat_hash_map<std::string, MetricMap> metrics_by_kernel;
  // CUPTI's own overhead, kept out of the phases.
  int64_t overhead_records = 0;
  int64_t overhead_ns = 0;
  bool empty = true;

  bool multi_gpu() const { return gpu_ids.size() > 1; }
};

// Groups `records` into phases. A record goes to the marker of its phase that holds its start,
// else to the first marker of its phase, else to a node made for it. The returned groups point
// into `records`, which must outlive the timeline.
StoryTimeline BuildStoryTimeline(const std::vector<gpuprof::v1::ActivityRecord>& records);

}  // namespace gpuprof::report

#endif  // GPUPROF_REPORT_STORY_TIMELINE_H_
