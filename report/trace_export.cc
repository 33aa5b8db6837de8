#include "report/trace_export.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/enum_names.h"
#include "report/execution_story.h"

namespace gpuprof::report {
namespace {

namespace api = ::gpuprof::v1;

// Process ids: phases first, then the host, then one per GPU.
constexpr int kPhasesPid = 1;
constexpr int kHostPid = 2;
constexpr int kFirstGpuPid = 10;
constexpr int kSynchronizationTid = 1;
constexpr int kOverheadTid = 2;
// Host threads that launched work get tids from here on, in order of CUPTI's thread id.
constexpr int64_t kFirstLaunchThreadTid = 100;
// A slice's name on its track, at most; the full name goes to args.
constexpr size_t kMaxSliceNameBytes = 40;
// Records without timestamps listed (with their args) in otherData, at most.
constexpr size_t kMaxUntimedListed = 64;
// Flow events (arrows) from a launch to its GPU work share this name and category, as the
// trace event format pairs a flow's start and finish by (id, cat, name).
constexpr absl::string_view kFlowName = "launch";

// 64-bit: a record's gpu_id comes from a worker and may be any int32.
int64_t GpuPid(int32_t gpu_id) { return kFirstGpuPid + int64_t{std::max(gpu_id, 0)}; }

std::string JsonNumber(double value) {
  if (!std::isfinite(value)) return "null";  // JSON has no NaN or infinity
  return absl::StrFormat("%.6g", value);
}

// later - earlier, or 0 when negative; saturates instead of overflowing. Records come from a
// worker and may hold any value (0 for a timestamp CUPTI could not take, garbage from a bug).
int64_t ElapsedNs(int64_t earlier, int64_t later) {
  int64_t difference = 0;
  if (__builtin_sub_overflow(later, earlier, &difference)) {
    return later > earlier ? std::numeric_limits<int64_t>::max() : 0;
  }
  return std::max<int64_t>(difference, 0);
}

// Microseconds with nanosecond resolution.
std::string Microseconds(int64_t nanoseconds) {
  return absl::StrFormat("%.3f", static_cast<double>(nanoseconds) / 1e3);
}

std::string JsonArray(const google::protobuf::RepeatedField<uint32_t>& values) {
  return absl::StrCat("[", absl::StrJoin(values, ","), "]");
}

// Builds one event's "args" object, key by key.
class JsonObject {
 public:
  void AddRaw(absl::string_view key, absl::string_view json) {
    absl::StrAppend(&text_, text_.empty() ? "" : ",", JsonString(key), ":", json);
  }
  void Add(absl::string_view key, absl::string_view value) { AddRaw(key, JsonString(value)); }
  void Add(absl::string_view key, int64_t value) { AddRaw(key, absl::StrCat(value)); }
  void Add(absl::string_view key, double value) { AddRaw(key, JsonNumber(value)); }
  std::string Render() const { return absl::StrCat("{", text_, "}"); }

 private:
  std::string text_;
};

absl::string_view Category(api::ActivityRecord::Kind kind) {
  switch (kind) {
    case api::ActivityRecord::KIND_KERNEL:
      return "kernel";
    case api::ActivityRecord::KIND_MEMCPY:
      return "memcpy";
    case api::ActivityRecord::KIND_MEMSET:
      return "memset";
    case api::ActivityRecord::KIND_SYNCHRONIZATION:
      return "synchronization";
    case api::ActivityRecord::KIND_OVERHEAD:
      return "cupti_overhead";
    case api::ActivityRecord::KIND_PHASE:
      return "phase";
    case api::ActivityRecord::KIND_LAUNCH:
      return "launch";
    default:
      return "activity";
  }
}

bool OnHost(const api::ActivityRecord& record) {
  return record.kind() == api::ActivityRecord::KIND_SYNCHRONIZATION ||
         record.kind() == api::ActivityRecord::KIND_OVERHEAD ||
         record.kind() == api::ActivityRecord::KIND_LAUNCH;
}

bool IsGpuWork(const api::ActivityRecord& record) {
  return record.kind() == api::ActivityRecord::KIND_KERNEL ||
         record.kind() == api::ActivityRecord::KIND_MEMCPY ||
         record.kind() == api::ActivityRecord::KIND_MEMSET;
}

// CUPTI writes 0 for a timestamp it did not take (kernels replayed by the profiler have
// none); such a record has no place on the timeline.
bool HasTimestamps(const api::ActivityRecord& record) {
  return record.start_ns() > 0 && record.end_ns() > 0;
}

// At most `max_bytes` of `text`, cut at a UTF-8 character boundary and marked with "...".
std::string Bounded(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t end = max_bytes - 3;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return absl::StrCat(text.substr(0, end), "...");
}

// What the slice is called on its track: a phase by its phase, a kernel without return type,
// namespaces and parameters (and template arguments when still too long), anything else cut
// to kMaxSliceNameBytes. Args keep the full name (see Args).
std::string SliceName(const api::ActivityRecord& record) {
  if (record.kind() == api::ActivityRecord::KIND_PHASE &&
      record.phase() != api::PHASE_UNSPECIFIED) {
    return EnumShortName(record.phase());
  }
  if (record.kind() == api::ActivityRecord::KIND_KERNEL) {
    std::string name = ShortKernelName(record.name());
    if (name.size() > kMaxSliceNameBytes) {
      if (const size_t bracket = name.find('<'); bracket != std::string::npos && bracket > 0) {
        name = absl::StrCat(name.substr(0, bracket), "<...>");
      }
    }
    return Bounded(name, kMaxSliceNameBytes);
  }
  return Bounded(record.name(), kMaxSliceNameBytes);
}

// The GPU work one launch made (a graph launch makes many records).
struct LaunchTargets {
  std::vector<int64_t> flow_ids;
  std::string first_name;
  bool all_scaffolding = true;
};

// Flagged by the tracer, or a launch whose GPU work is all flagged.
bool IsScaffolding(const api::ActivityRecord& record, const LaunchTargets* launched) {
  return record.scaffolding() || (launched != nullptr && launched->all_scaffolding);
}

std::string Args(const api::ActivityRecord& record, const LaunchTargets* launched = nullptr) {
  JsonObject args;
  if (const std::string slice_name = SliceName(record); slice_name != record.name()) {
    args.Add(record.kind() == api::ActivityRecord::KIND_PHASE ? "description" : "full_name",
             record.name());
  }
  if (record.kind() != api::ActivityRecord::KIND_PHASE) {
    args.Add("phase", EnumShortName(record.phase()));
  }
  if (record.correlation_id() != 0) {
    args.Add("correlation_id", static_cast<int64_t>(record.correlation_id()));
  }
  if (IsScaffolding(record, launched)) args.AddRaw("scaffolding", "true");
  switch (record.kind()) {
    case api::ActivityRecord::KIND_KERNEL:
      args.AddRaw("grid", JsonArray(record.grid()));
      args.AddRaw("block", JsonArray(record.block()));
      args.Add("registers_per_thread", static_cast<int64_t>(record.registers_per_thread()));
      args.Add("static_shared_memory_bytes", record.static_shared_memory());
      args.Add("dynamic_shared_memory_bytes", record.dynamic_shared_memory());
      break;
    case api::ActivityRecord::KIND_MEMCPY:
    case api::ActivityRecord::KIND_MEMSET: {
      args.Add("bytes", record.bytes());
      if (!record.copy_kind().empty()) args.Add("copy_kind", record.copy_kind());
      const int64_t duration_ns = ElapsedNs(record.start_ns(), record.end_ns());
      if (duration_ns > 0) {
        args.Add("bandwidth_gbps", static_cast<double>(record.bytes()) / duration_ns);
      }
      break;
    }
    case api::ActivityRecord::KIND_SYNCHRONIZATION:
      args.Add("gpu", static_cast<int64_t>(record.gpu_id()));
      if (record.stream_id() != 0) args.Add("stream", static_cast<int64_t>(record.stream_id()));
      break;
    case api::ActivityRecord::KIND_LAUNCH:
      args.Add("thread_id", static_cast<int64_t>(record.thread_id()));
      if (launched != nullptr) {
        args.Add("gpu_records", static_cast<int64_t>(launched->flow_ids.size()));
        args.Add("launched", launched->first_name);
      }
      break;
    default:
      break;
  }
  // Sorted, so the same record always exports the same way.
  const std::map<std::string, double> metrics(record.metrics().begin(), record.metrics().end());
  for (const auto& [name, value] : metrics) args.Add(name, value);
  return args.Render();
}

std::string MetadataEvent(absl::string_view name, int64_t pid, int64_t tid, absl::string_view key,
                          const std::string& value_json) {
  return absl::StrCat("{\"name\":", JsonString(name), ",\"ph\":\"M\",\"pid\":", pid,
                      ",\"tid\":", tid, ",\"args\":{", JsonString(key), ":", value_json, "}}");
}

std::string GpuLabel(int32_t gpu_id, const api::ExperimentResult& result) {
  for (const api::GpuInfo& gpu : result.provenance().gpus()) {
    if (gpu.index() == gpu_id && !gpu.name().empty()) {
      return absl::StrCat("GPU ", gpu_id, ": ", gpu.name());
    }
  }
  return absl::StrCat("GPU ", gpu_id);
}

}  // namespace

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  out.reserve(text.size() + 2);
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string ExportChromeTrace(absl::string_view experiment_id,
                              const std::vector<api::ActivityRecord>& records,
                              const api::ExperimentResult& result) {
  int64_t origin_ns = std::numeric_limits<int64_t>::max();
  for (const api::ActivityRecord& record : records) {
    // CUPTI reports 0 for timestamps it could not take; they would drag the origin to 0.
    if (record.start_ns() > 0) origin_ns = std::min(origin_ns, record.start_ns());
  }
  if (origin_ns == std::numeric_limits<int64_t>::max()) origin_ns = 0;

  // In time order, so viewers that do not sort still read them right. Records without
  // timestamps stay off the timeline: listed in otherData instead of drawn at 0.
  std::vector<const api::ActivityRecord*> ordered;
  std::vector<const api::ActivityRecord*> untimed;
  ordered.reserve(records.size());
  for (const api::ActivityRecord& record : records) {
    (HasTimestamps(record) ? ordered : untimed).push_back(&record);
  }
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto* a, const auto* b) {
    return a->start_ns() < b->start_ns();
  });

  // Flows: each GPU record whose launch is in the trace gets an arrow from it. Correlation ids
  // are unique per process, so the first launch of an id is the one.
  std::map<uint32_t, LaunchTargets> launches;
  std::map<uint32_t, int64_t> launch_thread_tids;
  for (const api::ActivityRecord* record : ordered) {
    if (record->kind() != api::ActivityRecord::KIND_LAUNCH) continue;
    launch_thread_tids.emplace(record->thread_id(), 0);
    if (record->correlation_id() != 0) launches.emplace(record->correlation_id(), LaunchTargets{});
  }
  int64_t next_tid = kFirstLaunchThreadTid;
  for (auto& [thread, tid] : launch_thread_tids) tid = next_tid++;
  std::map<const api::ActivityRecord*, int64_t> flow_id_of_gpu_record;
  int64_t flows = 0;
  for (const api::ActivityRecord* record : ordered) {
    if (!IsGpuWork(*record) || record->correlation_id() == 0) continue;
    const auto launch = launches.find(record->correlation_id());
    if (launch == launches.end()) continue;
    const int64_t flow_id = ++flows;
    flow_id_of_gpu_record[record] = flow_id;
    LaunchTargets& targets = launch->second;
    if (targets.flow_ids.empty()) targets.first_name = SliceName(*record);
    targets.flow_ids.push_back(flow_id);
    targets.all_scaffolding = targets.all_scaffolding && record->scaffolding();
  }

  std::vector<std::string> events;
  std::set<int32_t> gpus;
  std::set<std::pair<int32_t, uint32_t>> streams;
  bool any_phase = false, any_sync = false, any_overhead = false;
  for (const api::ActivityRecord* record : ordered) {
    int64_t pid = 0;
    int64_t tid = 0;
    const LaunchTargets* launched = nullptr;
    if (record->kind() == api::ActivityRecord::KIND_PHASE) {
      pid = kPhasesPid;
      any_phase = true;
    } else if (record->kind() == api::ActivityRecord::KIND_LAUNCH) {
      pid = kHostPid;
      tid = launch_thread_tids.at(record->thread_id());
      if (const auto launch = launches.find(record->correlation_id());
          launch != launches.end() && !launch->second.flow_ids.empty()) {
        launched = &launch->second;
      }
    } else if (OnHost(*record)) {
      pid = kHostPid;
      const bool sync = record->kind() == api::ActivityRecord::KIND_SYNCHRONIZATION;
      tid = sync ? kSynchronizationTid : kOverheadTid;
      (sync ? any_sync : any_overhead) = true;
    } else {
      pid = GpuPid(record->gpu_id());
      tid = record->stream_id();
      gpus.insert(record->gpu_id());
      streams.insert({record->gpu_id(), record->stream_id()});
    }
    const int64_t start_ns = ElapsedNs(origin_ns, record->start_ns());
    const int64_t duration_ns = ElapsedNs(record->start_ns(), record->end_ns());
    // Scaffolding stays on its stream (it is what held the stream) but can be filtered out; a
    // launch of scaffolding only is scaffolding too.
    const std::string category = IsScaffolding(*record, launched)
                                     ? absl::StrCat(Category(record->kind()), ",scaffolding")
                                     : std::string(Category(record->kind()));
    events.push_back(absl::StrCat(
        "{\"name\":", JsonString(SliceName(*record)), ",\"cat\":", JsonString(category),
        ",\"ph\":\"X\",\"ts\":", Microseconds(start_ns), ",\"dur\":", Microseconds(duration_ns),
        ",\"pid\":", pid, ",\"tid\":", tid, ",\"args\":", Args(*record, launched), "}"));
    // A flow binds to the slice that encloses its timestamp: the middle of each slice, which
    // no neighbour on the track shares.
    const std::string middle = Microseconds(
        start_ns + std::min(duration_ns / 2, std::numeric_limits<int64_t>::max() - start_ns));
    if (launched != nullptr) {
      for (const int64_t flow_id : launched->flow_ids) {
        events.push_back(absl::StrCat("{\"name\":", JsonString(kFlowName), ",\"cat\":",
                                      JsonString(kFlowName), ",\"ph\":\"s\",\"id\":", flow_id,
                                      ",\"ts\":", middle, ",\"pid\":", pid, ",\"tid\":", tid, "}"));
      }
    }
    if (const auto flow = flow_id_of_gpu_record.find(record); flow != flow_id_of_gpu_record.end()) {
      events.push_back(absl::StrCat("{\"name\":", JsonString(kFlowName), ",\"cat\":",
                                    JsonString(kFlowName), ",\"ph\":\"f\",\"bp\":\"e\",\"id\":",
                                    flow->second, ",\"ts\":", middle, ",\"pid\":", pid,
                                    ",\"tid\":", tid, "}"));
    }
  }

  // Names and order of the tracks.
  std::vector<std::string> metadata;
  if (any_phase) {
    metadata.push_back(MetadataEvent("process_name", kPhasesPid, 0, "name",
                                     JsonString(absl::StrCat("phases of ", experiment_id))));
    metadata.push_back(MetadataEvent("process_sort_index", kPhasesPid, 0, "sort_index", "0"));
    metadata.push_back(MetadataEvent("thread_name", kPhasesPid, 0, "name", JsonString("phase")));
  }
  for (int32_t gpu : gpus) {
    const int64_t pid = GpuPid(gpu);
    metadata.push_back(
        MetadataEvent("process_name", pid, 0, "name", JsonString(GpuLabel(gpu, result))));
    metadata.push_back(
        MetadataEvent("process_sort_index", pid, 0, "sort_index", absl::StrCat(int64_t{1} + gpu)));
  }
  for (const auto& [gpu, stream] : streams) {
    metadata.push_back(MetadataEvent("thread_name", GpuPid(gpu), int64_t{stream}, "name",
                                     JsonString(absl::StrCat("stream ", stream))));
  }
  if (any_sync || any_overhead || !launch_thread_tids.empty()) {
    metadata.push_back(MetadataEvent("process_name", kHostPid, 0, "name", JsonString("host")));
    metadata.push_back(MetadataEvent("process_sort_index", kHostPid, 0, "sort_index", "1000"));
    for (const auto& [thread, tid] : launch_thread_tids) {
      metadata.push_back(MetadataEvent("thread_name", kHostPid, tid, "name",
                                       JsonString(absl::StrCat("CUDA API, thread ", thread))));
    }
    if (any_sync) {
      metadata.push_back(MetadataEvent("thread_name", kHostPid, kSynchronizationTid, "name",
                                       JsonString("CPU waits (synchronization)")));
    }
    if (any_overhead) {
      metadata.push_back(MetadataEvent("thread_name", kHostPid, kOverheadTid, "name",
                                       JsonString("CUPTI overhead")));
    }
  }

  JsonObject other;
  other.Add("experiment_id", experiment_id);
  other.Add("time_origin_ns", origin_ns);
  other.Add("records", static_cast<int64_t>(records.size()));
  other.Add("launch_flows", flows);
  // Left out of traceEvents, counted here; the first few listed with what they carry (the
  // profiler's replayed kernels hold the hardware metrics).
  other.Add("untimed_records_left_out", static_cast<int64_t>(untimed.size()));
  std::vector<std::string> untimed_listed;
  for (size_t i = 0; i < untimed.size() && i < kMaxUntimedListed; ++i) {
    untimed_listed.push_back(absl::StrCat("{\"name\":", JsonString(untimed[i]->name()),
                                          ",\"cat\":", JsonString(Category(untimed[i]->kind())),
                                          ",\"args\":", Args(*untimed[i]), "}"));
  }
  other.AddRaw("untimed_records", absl::StrCat("[", absl::StrJoin(untimed_listed, ","), "]"));
  other.Add("dropped_activity_records", result.dropped_activity_records());
  if (!result.provenance().gpuprof_version().empty()) {
    other.Add("gpuprof_version", result.provenance().gpuprof_version());
  }
  if (!result.provenance().cupti_version().empty()) {
    other.Add("cupti_version", result.provenance().cupti_version());
  }
  if (!result.provenance().hostname().empty()) {
    other.Add("hostname", result.provenance().hostname());
  }
  std::vector<std::string> not_collected;
  for (const std::string& line : result.not_collected()) not_collected.push_back(JsonString(line));
  other.AddRaw("not_collected", absl::StrCat("[", absl::StrJoin(not_collected, ","), "]"));

  std::string json = absl::StrCat("{\"displayTimeUnit\":\"ns\",\"otherData\":", other.Render(),
                                  ",\n\"traceEvents\":[\n");
  bool first = true;
  for (const std::vector<std::string>* group : {&metadata, &events}) {
    for (const std::string& event : *group) {
      absl::StrAppend(&json, first ? "" : ",\n", event);
      first = false;
    }
  }
  absl::StrAppend(&json, "\n]}\n");
  return json;
}

}  // namespace gpuprof::report
