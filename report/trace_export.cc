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

namespace gpuprof::report {
namespace {

namespace api = ::gpuprof::v1;

// Process ids: phases first, then the host, then one per GPU.
constexpr int kPhasesPid = 1;
constexpr int kHostPid = 2;
constexpr int kFirstGpuPid = 10;
constexpr int kSynchronizationTid = 1;
constexpr int kOverheadTid = 2;

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
    default:
      return "activity";
  }
}

bool OnHost(const api::ActivityRecord& record) {
  return record.kind() == api::ActivityRecord::KIND_SYNCHRONIZATION ||
         record.kind() == api::ActivityRecord::KIND_OVERHEAD;
}

std::string Args(const api::ActivityRecord& record) {
  JsonObject args;
  if (record.kind() != api::ActivityRecord::KIND_PHASE) {
    args.Add("phase", EnumShortName(record.phase()));
  }
  if (record.correlation_id() != 0) {
    args.Add("correlation_id", static_cast<int64_t>(record.correlation_id()));
  }
  if (record.scaffolding()) args.AddRaw("scaffolding", "true");
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

  std::vector<std::string> events;
  std::set<int32_t> gpus;
  std::set<std::pair<int32_t, uint32_t>> streams;
  bool any_phase = false, any_sync = false, any_overhead = false;
  // In time order, so viewers that do not sort still read them right.
  std::vector<const api::ActivityRecord*> ordered;
  ordered.reserve(records.size());
  for (const api::ActivityRecord& record : records) ordered.push_back(&record);
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto* a, const auto* b) {
    return a->start_ns() < b->start_ns();
  });
  for (const api::ActivityRecord* record : ordered) {
    int64_t pid = 0;
    int64_t tid = 0;
    if (record->kind() == api::ActivityRecord::KIND_PHASE) {
      pid = kPhasesPid;
      any_phase = true;
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
    // Scaffolding stays on its stream (it is what held the stream) but can be filtered out.
    const std::string category =
        record->scaffolding() ? absl::StrCat(Category(record->kind()), ",scaffolding")
                              : std::string(Category(record->kind()));
    events.push_back(absl::StrCat(
        "{\"name\":", JsonString(record->name()), ",\"cat\":", JsonString(category),
        ",\"ph\":\"X\",\"ts\":", Microseconds(start_ns), ",\"dur\":", Microseconds(duration_ns),
        ",\"pid\":", pid, ",\"tid\":", tid, ",\"args\":", Args(*record), "}"));
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
  if (any_sync || any_overhead) {
    metadata.push_back(MetadataEvent("process_name", kHostPid, 0, "name", JsonString("host")));
    metadata.push_back(MetadataEvent("process_sort_index", kHostPid, 0, "sort_index", "1000"));
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
