#include "report/story_timeline.h"

#include <algorithm>
#include <iterator>
#include <limits>

#include "common/statistics.h"

namespace gpuprof::report {

namespace api = ::gpuprof::v1;

bool RecordGroup::is_gpu_work() const {
  return kind == api::ActivityRecord::KIND_KERNEL || kind == api::ActivityRecord::KIND_MEMCPY ||
         kind == api::ActivityRecord::KIND_MEMSET;
}

double RecordGroup::median_ns() const {
  return Median(std::vector<double>(durations_ns.begin(), durations_ns.end()));
}

int64_t PhaseNode::GpuBusyNs() const {
  int64_t busy_ns = 0;
  for (const RecordGroup& group : groups) {
    if (group.is_gpu_work()) busy_ns += group.total_ns;
  }
  return busy_ns;
}

int64_t PhaseNode::GpuBusyNs(int32_t gpu_id) const {
  int64_t busy_ns = 0;
  for (const RecordGroup& group : groups) {
    if (group.is_gpu_work() && group.gpu_id == gpu_id) busy_ns += group.total_ns;
  }
  return busy_ns;
}

std::vector<int32_t> PhaseNode::GpuIds() const {
  std::vector<int32_t> ids;
  for (const RecordGroup& group : groups) {
    if (std::find(ids.begin(), ids.end(), group.gpu_id) == ids.end()) ids.push_back(group.gpu_id);
  }
  return ids;
}

namespace {

bool IsGpuWork(api::ActivityRecord::Kind kind) {
  return kind == api::ActivityRecord::KIND_KERNEL || kind == api::ActivityRecord::KIND_MEMCPY ||
         kind == api::ActivityRecord::KIND_MEMSET;
}

// The node a record belongs to; made when its phase has no marker.
PhaseNode& NodeFor(const api::ActivityRecord& record, std::vector<PhaseNode>& phases) {
  PhaseNode* node = nullptr;
  for (PhaseNode& candidate : phases) {
    if (candidate.phase != record.phase()) continue;
    if (node == nullptr) node = &candidate;
    if (record.start_ns() >= candidate.start_ns && record.start_ns() < candidate.end_ns) {
      return candidate;
    }
  }
  if (node != nullptr) return *node;
  phases.push_back({.phase = record.phase(),
                    .start_ns = record.start_ns(),
                    .end_ns = record.end_ns(),
                    .has_marker = false});
  return phases.back();
}

void AddToGroup(const api::ActivityRecord& record, PhaseNode& node) {
  auto group = std::find_if(node.groups.begin(), node.groups.end(), [&](const RecordGroup& g) {
    return g.kind == record.kind() && g.name == record.name() && g.gpu_id == record.gpu_id() &&
           g.scaffolding == record.scaffolding();
  });
  if (group == node.groups.end()) {
    node.groups.push_back({.kind = record.kind(),
                           .name = record.name(),
                           .gpu_id = record.gpu_id(),
                           .scaffolding = record.scaffolding(),
                           .first = &record});
    group = std::prev(node.groups.end());
  }
  ++group->count;
  const int64_t duration = std::max<int64_t>(record.end_ns() - record.start_ns(), 0);
  if (record.start_ns() > 0) {
    group->durations_ns.push_back(duration);
    group->starts_ns.push_back(record.start_ns());
  }
  group->total_ns += duration;
  group->total_bytes += record.bytes();
  if (group->metrics.empty() && !record.metrics().empty()) {
    group->metrics = MetricMap(record.metrics().begin(), record.metrics().end());
  }
}

}  // namespace

StoryTimeline BuildStoryTimeline(const std::vector<api::ActivityRecord>& records) {
  StoryTimeline timeline;
  timeline.empty = records.empty();
  // Phases from their markers, in time order.
  int64_t origin_ns = std::numeric_limits<int64_t>::max();
  for (const api::ActivityRecord& record : records) {
    if (record.start_ns() > 0) origin_ns = std::min(origin_ns, record.start_ns());
    if (record.kind() == api::ActivityRecord::KIND_PHASE) {
      timeline.phases.push_back({.phase = record.phase(),
                                 .label = record.name(),
                                 .start_ns = record.start_ns(),
                                 .end_ns = record.end_ns(),
                                 .has_marker = true});
    }
  }
  timeline.origin_ns = origin_ns == std::numeric_limits<int64_t>::max() ? 0 : origin_ns;
  std::sort(timeline.phases.begin(), timeline.phases.end(),
            [](const PhaseNode& a, const PhaseNode& b) { return a.start_ns < b.start_ns; });

  std::vector<const api::ActivityRecord*> ordered;
  for (const api::ActivityRecord& record : records) {
    // Launch calls are the trace's (arrows to their kernels); the story tells the GPU's side.
    if (record.kind() == api::ActivityRecord::KIND_PHASE ||
        record.kind() == api::ActivityRecord::KIND_LAUNCH) {
      continue;
    }
    ordered.push_back(&record);
    if (record.kind() == api::ActivityRecord::KIND_KERNEL && !record.metrics().empty()) {
      MetricMap& metrics = timeline.metrics_by_kernel[record.name()];
      for (const auto& [name, value] : record.metrics()) metrics.emplace(name, value);
    }
  }
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto* a, const auto* b) { return a->start_ns() < b->start_ns(); });

  for (const api::ActivityRecord* record : ordered) {
    if (record->kind() == api::ActivityRecord::KIND_OVERHEAD) {
      timeline.overhead_ns += std::max<int64_t>(record->end_ns() - record->start_ns(), 0);
      ++timeline.overhead_records;
      continue;
    }
    if (IsGpuWork(record->kind()) && std::find(timeline.gpu_ids.begin(), timeline.gpu_ids.end(),
                                               record->gpu_id()) == timeline.gpu_ids.end()) {
      timeline.gpu_ids.push_back(record->gpu_id());
    }
    PhaseNode& node = NodeFor(*record, timeline.phases);
    if (!node.has_marker) {
      node.start_ns = std::min(node.start_ns, record->start_ns());
      node.end_ns = std::max(node.end_ns, record->end_ns());
    }
    AddToGroup(*record, node);
  }
  std::sort(timeline.gpu_ids.begin(), timeline.gpu_ids.end());
  std::stable_sort(timeline.phases.begin(), timeline.phases.end(),
                   [](const PhaseNode& a, const PhaseNode& b) { return a.start_ns < b.start_ns; });
  return timeline;
}

}  // namespace gpuprof::report
