#include "report/trace_export.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

namespace gpuprof::report {
namespace {

namespace api = ::gpuprof::v1;
using ::google::protobuf::Struct;
using ::google::protobuf::Value;
using ::testing::HasSubstr;

api::ActivityRecord Record(const std::string& text) {
  api::ActivityRecord record;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &record)) << text;
  return record;
}

// Parses with protobuf's JSON parser (a real, strict one) into a google.protobuf.Struct.
Struct ParseJson(const std::string& json) {
  Struct parsed;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &parsed);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return parsed;
}

const Value& Field(const Struct& object, const std::string& key) {
  static const Value* const kMissing = new Value();
  const auto it = object.fields().find(key);
  EXPECT_NE(it, object.fields().end()) << "no field " << key;
  return it == object.fields().end() ? *kMissing : it->second;
}

// The recorded shape of a small index experiment: phases, a memset, kernels on two streams,
// a wait and a CUPTI overhead.
std::vector<api::ActivityRecord> SampleRecords() {
  return {
      Record("kind: KIND_PHASE name: 'allocation' phase: PHASE_ALLOCATION "
             "start_ns: 1000000 end_ns: 1500000"),
      Record("kind: KIND_PHASE name: 'timed' phase: PHASE_TIMED start_ns: 1500000 end_ns: 3000000"),
      Record("kind: KIND_MEMSET name: 'memset' start_ns: 1100000 end_ns: 1110000 gpu_id: 3 "
             "stream_id: 7 bytes: 1048576 phase: PHASE_ALLOCATION"),
      Record("kind: KIND_KERNEL name: 'void index<2, 1>(Params)' start_ns: 1600000 "
             "end_ns: 1641000 gpu_id: 3 stream_id: 7 correlation_id: 42 phase: PHASE_TIMED "
             "grid: [1024, 1, 1] block: [128, 1, 1] registers_per_thread: 32 "
             "static_shared_memory: 0 dynamic_shared_memory: 2048 "
             "metrics { key: 'dram__throughput.avg.pct_of_peak_sustained_elapsed' value: 91.5 }"),
      Record("kind: KIND_KERNEL name: 'other \"quoted\" \\\\ kernel\\n' start_ns: 1700000 "
             "end_ns: 1705000 gpu_id: 3 stream_id: 9 phase: PHASE_TIMED"),
      Record("kind: KIND_SYNCHRONIZATION name: 'cudaStreamSynchronize' start_ns: 1650000 "
             "end_ns: 1700000 gpu_id: 3 stream_id: 7 phase: PHASE_TIMED"),
      Record("kind: KIND_OVERHEAD name: 'CUPTI buffer flush' start_ns: 2000000 end_ns: 2001000 "
             "gpu_id: -1"),
  };
}

api::ExperimentResult SampleResult() {
  api::ExperimentResult result;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "provenance { gpus { index: 3 name: 'NVIDIA H100 80GB HBM3' } gpuprof_version: '0.1.0' } "
      "dropped_activity_records: 4 not_collected: 'hardware metrics: not collected: no permission'",
      &result));
  return result;
}

TEST(JsonStringTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonString("plain"), "\"plain\"");
  EXPECT_EQ(JsonString("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonString("line\nnext\ttab"), "\"line\\nnext\\ttab\"");
  EXPECT_EQ(JsonString(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(JsonString("µs"), "\"µs\"");  // UTF-8 passes through
  // Round trip through a real parser.
  const std::string nasty = "void f<'\"'>(char const*)\\\n\x02";
  const Struct parsed = ParseJson("{\"k\":" + JsonString(nasty) + "}");
  EXPECT_EQ(Field(parsed, "k").string_value(), nasty);
}

TEST(ExportChromeTraceTest, IsValidJsonWithTraceEvents) {
  const Struct trace = ParseJson(ExportChromeTrace("exp-1", SampleRecords(), SampleResult()));
  EXPECT_EQ(Field(trace, "displayTimeUnit").string_value(), "ns");
  const Struct& other = Field(trace, "otherData").struct_value();
  EXPECT_EQ(Field(other, "experiment_id").string_value(), "exp-1");
  EXPECT_EQ(Field(other, "dropped_activity_records").number_value(), 4);
  EXPECT_EQ(Field(other, "time_origin_ns").number_value(), 1000000);
  ASSERT_EQ(Field(other, "not_collected").list_value().values_size(), 1);
  EXPECT_GT(Field(trace, "traceEvents").list_value().values_size(), 7);
}

TEST(ExportChromeTraceTest, OneProcessPerGpuOneThreadPerStreamPhasesApart) {
  const Struct trace = ParseJson(ExportChromeTrace("exp-1", SampleRecords(), SampleResult()));
  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::string> thread_names;
  std::map<std::string, const Struct*> complete_by_name;
  for (const Value& value : Field(trace, "traceEvents").list_value().values()) {
    const Struct& event = value.struct_value();
    const std::string ph = Field(event, "ph").string_value();
    const int pid = static_cast<int>(Field(event, "pid").number_value());
    const int tid = static_cast<int>(Field(event, "tid").number_value());
    if (ph == "M") {
      const std::string name = Field(event, "name").string_value();
      const Struct& args = Field(event, "args").struct_value();
      if (name == "process_name") process_names[pid] = Field(args, "name").string_value();
      if (name == "thread_name") thread_names[{pid, tid}] = Field(args, "name").string_value();
      if (name == "process_sort_index") {
        EXPECT_TRUE(args.fields().count("sort_index"));
      }
    } else {
      EXPECT_EQ(ph, "X");
      complete_by_name[Field(event, "name").string_value()] = &event;
    }
  }
  // Phases, one GPU, the host.
  ASSERT_EQ(process_names.size(), 3u);
  std::set<std::string> labels;
  for (const auto& [pid, label] : process_names) labels.insert(label);
  EXPECT_TRUE(labels.count("GPU 3: NVIDIA H100 80GB HBM3"));
  EXPECT_TRUE(labels.count("phases of exp-1"));
  EXPECT_TRUE(labels.count("host"));

  const Struct& kernel = *complete_by_name.at("index<2, 1>");
  const Struct& phase = *complete_by_name.at("timed");
  const Struct& memset = *complete_by_name.at("memset");
  const Struct& wait = *complete_by_name.at("cudaStreamSynchronize");
  EXPECT_NE(Field(kernel, "pid").number_value(), Field(phase, "pid").number_value());
  EXPECT_NE(Field(kernel, "pid").number_value(), Field(wait, "pid").number_value());
  EXPECT_EQ(Field(kernel, "pid").number_value(), Field(memset, "pid").number_value());
  const int gpu_pid = static_cast<int>(Field(kernel, "pid").number_value());
  EXPECT_EQ(thread_names.at({gpu_pid, 7}), "stream 7");
  EXPECT_EQ(thread_names.at({gpu_pid, 9}), "stream 9");
  EXPECT_EQ(Field(kernel, "tid").number_value(), 7);
  EXPECT_EQ(Field(*complete_by_name.at("other \"quoted\" \\ kernel\n"), "tid").number_value(), 9);
}

TEST(ExportChromeTraceTest, TimesInMicrosecondsFromTheFirstRecord) {
  const Struct trace = ParseJson(ExportChromeTrace("exp-1", SampleRecords(), SampleResult()));
  for (const Value& value : Field(trace, "traceEvents").list_value().values()) {
    const Struct& event = value.struct_value();
    if (Field(event, "ph").string_value() != "X") continue;
    const std::string name = Field(event, "name").string_value();
    if (name == "index<2, 1>") {
      EXPECT_DOUBLE_EQ(Field(event, "ts").number_value(), 600.0);  // (1.6 ms - 1.0 ms) in us
      EXPECT_DOUBLE_EQ(Field(event, "dur").number_value(), 41.0);
      const Struct& args = Field(event, "args").struct_value();
      EXPECT_EQ(Field(args, "full_name").string_value(), "void index<2, 1>(Params)");
      EXPECT_EQ(Field(args, "phase").string_value(), "timed");
      EXPECT_EQ(Field(args, "registers_per_thread").number_value(), 32);
      EXPECT_EQ(Field(args, "dynamic_shared_memory_bytes").number_value(), 2048);
      EXPECT_EQ(Field(args, "correlation_id").number_value(), 42);
      ASSERT_EQ(Field(args, "grid").list_value().values_size(), 3);
      EXPECT_EQ(Field(args, "grid").list_value().values(0).number_value(), 1024);
      EXPECT_EQ(Field(args, "block").list_value().values(0).number_value(), 128);
      EXPECT_DOUBLE_EQ(
          Field(args, "dram__throughput.avg.pct_of_peak_sustained_elapsed").number_value(), 91.5);
    }
    if (name == "memset") {
      const Struct& args = Field(event, "args").struct_value();
      EXPECT_EQ(Field(args, "bytes").number_value(), 1048576);
      EXPECT_NEAR(Field(args, "bandwidth_gbps").number_value(), 104.8576, 1e-3);
    }
    if (name == "allocation") {
      EXPECT_DOUBLE_EQ(Field(event, "ts").number_value(), 0.0);
    }
  }
}

TEST(ExportChromeTraceTest, ScaffoldingIsMarkedOnItsStream) {
  const std::vector<api::ActivityRecord> records = {
      Record("kind: KIND_KERNEL name: 'StreamBlockerKernel<32>' start_ns: 1000 end_ns: 2000 "
             "gpu_id: 0 stream_id: 7 scaffolding: true"),
      Record("kind: KIND_MEMSET name: 'memset' bytes: 1024 start_ns: 500 end_ns: 900 gpu_id: 0 "
             "stream_id: 7 scaffolding: true"),
      // Named like the blocker, not flagged: the workload's.
      Record("kind: KIND_KERNEL name: 'StreamBlockerKernel<32>' start_ns: 2000 end_ns: 3000 "
             "gpu_id: 0 stream_id: 7 correlation_id: 9"),
  };
  const Struct trace = ParseJson(ExportChromeTrace("exp-2", records, api::ExperimentResult()));
  int scaffolding = 0;
  int workload = 0;
  for (const Value& value : Field(trace, "traceEvents").list_value().values()) {
    const Struct& event = value.struct_value();
    if (Field(event, "ph").string_value() != "X") continue;
    EXPECT_EQ(Field(event, "tid").number_value(), 7) << "on its stream's track";
    const Struct& args = Field(event, "args").struct_value();
    const std::string category = Field(event, "cat").string_value();
    if (args.fields().contains("scaffolding")) {
      ++scaffolding;
      EXPECT_TRUE(Field(args, "scaffolding").bool_value());
      EXPECT_THAT(category, HasSubstr(",scaffolding"));
    } else {
      ++workload;
      EXPECT_EQ(category, "kernel");
      EXPECT_EQ(Field(args, "correlation_id").number_value(), 9);
    }
  }
  EXPECT_EQ(scaffolding, 2);
  EXPECT_EQ(workload, 1);
}

TEST(ExportChromeTraceTest, EmptyAndNonFiniteInputsStayValid) {
  const Struct empty = ParseJson(ExportChromeTrace("none", {}, api::ExperimentResult()));
  EXPECT_EQ(Field(empty, "traceEvents").list_value().values_size(), 0);

  api::ActivityRecord odd = Record("kind: KIND_KERNEL name: 'k' start_ns: 10 end_ns: 5");
  (*odd.mutable_metrics())["bad"] = std::numeric_limits<double>::quiet_NaN();
  const std::string json = ExportChromeTrace("odd", {odd}, api::ExperimentResult());
  EXPECT_THAT(json, HasSubstr("\"bad\":null"));
  const Struct trace = ParseJson(json);
  for (const Value& value : Field(trace, "traceEvents").list_value().values()) {
    if (Field(value.struct_value(), "ph").string_value() == "X") {
      EXPECT_EQ(Field(value.struct_value(), "dur").number_value(), 0);  // end before start
    }
  }
}

// A gpu_id at the top of int32 (a worker may send anything) gets its own track past it,
// not a wrapped, negative id (CI's fuzzer found the overflow).
TEST(ExportChromeTraceTest, TheLargestGpuIdGetsATrackWithoutOverflow) {
  const api::ActivityRecord record =
      Record("kind: KIND_KERNEL name: 'k' start_ns: 10 end_ns: 20 gpu_id: 2147483647 "
             "stream_id: 4294967295");
  const std::string json = ExportChromeTrace("big", {record}, api::ExperimentResult());
  EXPECT_THAT(json, HasSubstr("\"pid\":2147483657,\"tid\":4294967295"));
  const Struct trace = ParseJson(json);
  for (const Value& value : Field(trace, "traceEvents").list_value().values()) {
    EXPECT_GT(Field(value.struct_value(), "pid").number_value(), 0);
  }
}

// The slices of a parsed trace by (pid, tid), for checking where flow events bind.
struct Slice {
  std::string name;
  double ts = 0;
  double dur = 0;
  const Struct* event = nullptr;
};
using SlicesByTrack = std::map<std::pair<int64_t, int64_t>, std::vector<Slice>>;

SlicesByTrack CompleteSlices(const Struct& trace) {
  SlicesByTrack slices;
  for (const Value& value : Field(trace, "traceEvents").list_value().values()) {
    const Struct& event = value.struct_value();
    if (Field(event, "ph").string_value() != "X") continue;
    slices[{static_cast<int64_t>(Field(event, "pid").number_value()),
            static_cast<int64_t>(Field(event, "tid").number_value())}]
        .push_back({Field(event, "name").string_value(), Field(event, "ts").number_value(),
                    Field(event, "dur").number_value(), &event});
  }
  return slices;
}

// The slice on the event's track that encloses its ts, as Perfetto binds a flow event with
// "bp":"e" (and every "s"); null when none does.
const Slice* EnclosingSlice(const SlicesByTrack& slices, const Struct& event) {
  const auto track = slices.find({static_cast<int64_t>(Field(event, "pid").number_value()),
                                  static_cast<int64_t>(Field(event, "tid").number_value())});
  if (track == slices.end()) return nullptr;
  const double ts = Field(event, "ts").number_value();
  for (const Slice& slice : track->second) {
    if (slice.ts <= ts && ts <= slice.ts + slice.dur) return &slice;
  }
  return nullptr;
}

// (launch slice name, GPU slice name) of every flow, after checking each start has exactly one
// finish with the same id, cat and name, bound ("bp":"e") inside a slice of its track.
std::vector<std::pair<std::string, std::string>> CheckedFlows(const Struct& trace) {
  const SlicesByTrack slices = CompleteSlices(trace);
  std::map<int64_t, const Struct*> starts;
  std::map<int64_t, const Struct*> finishes;
  for (const Value& value : Field(trace, "traceEvents").list_value().values()) {
    const Struct& event = value.struct_value();
    const std::string ph = Field(event, "ph").string_value();
    if (ph != "s" && ph != "f") continue;
    const int64_t id = static_cast<int64_t>(Field(event, "id").number_value());
    EXPECT_TRUE((ph == "s" ? starts : finishes).emplace(id, &event).second)
        << "two flow events " << ph << " with id " << id;
    if (ph == "f") EXPECT_EQ(Field(event, "bp").string_value(), "e");
  }
  EXPECT_EQ(starts.size(), finishes.size());
  std::vector<std::pair<std::string, std::string>> flows;
  for (const auto& [id, start] : starts) {
    const auto finish = finishes.find(id);
    if (finish == finishes.end()) {
      ADD_FAILURE() << "flow " << id << " has no finish";
      continue;
    }
    EXPECT_EQ(Field(*start, "cat").string_value(), Field(*finish->second, "cat").string_value());
    EXPECT_EQ(Field(*start, "name").string_value(), Field(*finish->second, "name").string_value());
    const Slice* launch = EnclosingSlice(slices, *start);
    const Slice* work = EnclosingSlice(slices, *finish->second);
    if (launch == nullptr || work == nullptr) {
      ADD_FAILURE() << "flow " << id << " binds to no slice";
      continue;
    }
    EXPECT_THAT(Field(*launch->event, "cat").string_value(), ::testing::StartsWith("launch"));
    EXPECT_EQ(Field(Field(*launch->event, "args").struct_value(), "correlation_id").number_value(),
              Field(Field(*work->event, "args").struct_value(), "correlation_id").number_value());
    flows.push_back({launch->name, work->name});
  }
  return flows;
}

TEST(ExportChromeTraceTest, LaunchesOnTheirHostThreadWithAFlowToEachKernel) {
  std::vector<api::ActivityRecord> records = SampleRecords();  // its kernel has correlation 42
  records.push_back(Record("kind: KIND_LAUNCH name: 'cudaLaunchKernel' start_ns: 1590000 "
                           "end_ns: 1594000 correlation_id: 42 thread_id: 4242 gpu_id: -1 "
                           "phase: PHASE_TIMED"));
  // A graph launch: two kernels carry its correlation id.
  records.push_back(Record("kind: KIND_LAUNCH name: 'cudaGraphLaunch' start_ns: 1800000 "
                           "end_ns: 1810000 correlation_id: 50 thread_id: 4242 gpu_id: -1"));
  records.push_back(Record("kind: KIND_KERNEL name: 'void a(int)' start_ns: 1820000 "
                           "end_ns: 1830000 gpu_id: 3 stream_id: 7 correlation_id: 50"));
  records.push_back(Record("kind: KIND_KERNEL name: 'void b(int)' start_ns: 1830000 "
                           "end_ns: 1840000 gpu_id: 3 stream_id: 7 correlation_id: 50"));
  // A launch of another thread whose GPU record was dropped, and a kernel without its launch.
  records.push_back(Record("kind: KIND_LAUNCH name: 'cuLaunchKernel' start_ns: 1850000 "
                           "end_ns: 1852000 correlation_id: 60 thread_id: 17 gpu_id: -1"));
  records.push_back(Record("kind: KIND_KERNEL name: 'c' start_ns: 1860000 end_ns: 1870000 "
                           "gpu_id: 3 stream_id: 9 correlation_id: 70"));
  const Struct trace = ParseJson(ExportChromeTrace("exp-3", records, SampleResult()));

  const auto flows = CheckedFlows(trace);
  EXPECT_THAT(flows, ::testing::UnorderedElementsAre(
                         std::pair<std::string, std::string>("cudaLaunchKernel", "index<2, 1>"),
                         std::pair<std::string, std::string>("cudaGraphLaunch", "a"),
                         std::pair<std::string, std::string>("cudaGraphLaunch", "b")));
  EXPECT_EQ(Field(Field(trace, "otherData").struct_value(), "launch_flows").number_value(), 3);

  // Launch slices sit on the host, one track per launching thread, named after it.
  std::map<int64_t, std::string> host_threads;
  for (const Value& value : Field(trace, "traceEvents").list_value().values()) {
    const Struct& event = value.struct_value();
    if (Field(event, "ph").string_value() == "M" &&
        Field(event, "name").string_value() == "thread_name" &&
        Field(event, "pid").number_value() == 2) {
      host_threads[static_cast<int64_t>(Field(event, "tid").number_value())] =
          Field(Field(event, "args").struct_value(), "name").string_value();
    }
  }
  const SlicesByTrack slices = CompleteSlices(trace);
  int launches = 0;
  for (const auto& [track, track_slices] : slices) {
    for (const Slice& slice : track_slices) {
      if (Field(*slice.event, "cat").string_value() != "launch") continue;
      ++launches;
      EXPECT_EQ(track.first, 2) << "on the host";
      const Struct& args = Field(*slice.event, "args").struct_value();
      const std::string thread =
          absl::StrCat(static_cast<int64_t>(Field(args, "thread_id").number_value()));
      EXPECT_EQ(host_threads[track.second], "CUDA API, thread " + thread);
      if (slice.name == "cudaGraphLaunch") {
        EXPECT_EQ(Field(args, "gpu_records").number_value(), 2);
        EXPECT_EQ(Field(args, "launched").string_value(), "a");
      }
      if (slice.name == "cuLaunchKernel") EXPECT_FALSE(args.fields().contains("gpu_records"));
    }
  }
  EXPECT_EQ(launches, 3);
  EXPECT_EQ(host_threads.size(), 4u);  // two launching threads, the waits, the overhead
}

TEST(ExportChromeTraceTest, ALaunchOfScaffoldingIsScaffolding) {
  const std::vector<api::ActivityRecord> records = {
      Record("kind: KIND_LAUNCH name: 'cudaLaunchKernel' start_ns: 100 end_ns: 200 "
             "correlation_id: 5 thread_id: 1"),
      Record("kind: KIND_KERNEL name: 'StreamBlockerKernel<32>' start_ns: 300 end_ns: 2000 "
             "gpu_id: 0 stream_id: 7 correlation_id: 5 scaffolding: true"),
  };
  const Struct trace = ParseJson(ExportChromeTrace("exp-4", records, api::ExperimentResult()));
  EXPECT_EQ(CheckedFlows(trace).size(), 1u);
  for (const auto& [track, slices] : CompleteSlices(trace)) {
    for (const Slice& slice : slices) {
      EXPECT_THAT(Field(*slice.event, "cat").string_value(), HasSubstr(",scaffolding"));
      EXPECT_TRUE(Field(Field(*slice.event, "args").struct_value(), "scaffolding").bool_value());
    }
  }
}

// A kernel replayed by the profiler comes without timestamps: it is not drawn at 0 with no
// duration but counted and listed, metrics and all, in otherData.
TEST(ExportChromeTraceTest, RecordsWithoutTimestampsAreCountedNotDrawn) {
  std::vector<api::ActivityRecord> records = SampleRecords();
  records.push_back(Record(
      "kind: KIND_KERNEL name: 'void profiled<2, 1>(Params)' start_ns: 0 end_ns: 0 gpu_id: 3 "
      "stream_id: 7 correlation_id: 328 phase: PHASE_PROFILING "
      "metrics { key: 'dram__throughput.avg.pct_of_peak_sustained_elapsed' value: 84 }"));
  records.push_back(Record("kind: KIND_MEMCPY name: 'memcpy dtoh' start_ns: 2500000 end_ns: 0 "
                           "gpu_id: 3 stream_id: 7"));
  const Struct trace = ParseJson(ExportChromeTrace("exp-5", records, SampleResult()));
  const Struct& other = Field(trace, "otherData").struct_value();
  EXPECT_EQ(Field(other, "records").number_value(), records.size());
  EXPECT_EQ(Field(other, "untimed_records_left_out").number_value(), 2);
  const auto& listed = Field(other, "untimed_records").list_value();
  ASSERT_EQ(listed.values_size(), 2);
  const Struct& replayed = listed.values(0).struct_value();
  EXPECT_EQ(Field(replayed, "name").string_value(), "void profiled<2, 1>(Params)");
  EXPECT_EQ(Field(replayed, "cat").string_value(), "kernel");
  const Struct& replayed_args = Field(replayed, "args").struct_value();
  EXPECT_EQ(Field(replayed_args, "phase").string_value(), "profiling");
  EXPECT_EQ(Field(replayed_args, "correlation_id").number_value(), 328);
  EXPECT_EQ(
      Field(replayed_args, "dram__throughput.avg.pct_of_peak_sustained_elapsed").number_value(),
      84);

  int drawn = 0;
  for (const auto& [track, slices] : CompleteSlices(trace)) {
    for (const Slice& slice : slices) {
      ++drawn;
      EXPECT_GT(slice.dur, 0) << slice.name;
      EXPECT_NE(slice.name, "profiled<2, 1>") << "the replayed kernel is off the timeline";
    }
  }
  EXPECT_EQ(drawn, static_cast<int>(SampleRecords().size()));
}

TEST(ExportChromeTraceTest, SliceNamesAreShortWithTheFullNameInArgs) {
  const std::string replay_phase =
      "profiling (kernel replay: each kernel ran 8 times (8 passes) to read 5 metrics on GH100; "
      "memory saved and restored between passes)";
  const std::string anonymous_kernel =
      "gpuprof::cupti::testing::(anonymous namespace)::CopyKernel(int4 const*, int4*, unsigned "
      "long)";
  const std::string template_kernel =
      "void ns::GatherRowsKernel<ns::Layout<128, 256, 8>, ns::Epilogue<true, false, 7>, 42>(Params)";
  // Multi-byte characters where the cut falls (byte 37 is the second of a 'µ'): it must not
  // split one.
  const std::string long_copy = "memcpy " + std::string(29, 'x') + "\u00b5\u00b5\u00b5\u00b5 tail";
  const std::vector<api::ActivityRecord> records = {
      Record("kind: KIND_PHASE phase: PHASE_PROFILING start_ns: 100 end_ns: 900 name: '" +
             replay_phase + "'"),
      Record("kind: KIND_KERNEL start_ns: 200 end_ns: 300 name: '" + anonymous_kernel + "'"),
      Record("kind: KIND_KERNEL start_ns: 300 end_ns: 400 name: '" + template_kernel + "'"),
      Record("kind: KIND_MEMCPY start_ns: 400 end_ns: 500 name: '" + long_copy + "'"),
      Record("kind: KIND_PHASE phase: PHASE_TIMED start_ns: 900 end_ns: 1000 name: 'timed'"),
  };
  const Struct trace = ParseJson(ExportChromeTrace("exp-6", records, api::ExperimentResult()));
  std::map<std::string, const Struct*> args_by_name;
  for (const auto& [track, slices] : CompleteSlices(trace)) {
    for (const Slice& slice : slices) {
      EXPECT_LE(slice.name.size(), 40u) << slice.name;
      args_by_name[slice.name] = &Field(*slice.event, "args").struct_value();
    }
  }
  ASSERT_EQ(args_by_name.size(), 5u);
  EXPECT_EQ(Field(*args_by_name.at("profiling"), "description").string_value(), replay_phase);
  EXPECT_EQ(Field(*args_by_name.at("CopyKernel"), "full_name").string_value(), anonymous_kernel);
  EXPECT_EQ(Field(*args_by_name.at("GatherRowsKernel<...>"), "full_name").string_value(),
            template_kernel);
  // A name that is already short says nothing more.
  EXPECT_FALSE(args_by_name.at("timed")->fields().contains("description"));
  bool copy_found = false;
  for (const auto& [name, args] : args_by_name) {
    if (name.rfind("memcpy xxx", 0) != 0) continue;
    copy_found = true;
    EXPECT_THAT(name, ::testing::EndsWith("..."));
    EXPECT_EQ(Field(*args, "full_name").string_value(), long_copy);
  }
  EXPECT_TRUE(copy_found);
}

template <typename Message>
Message ReadTestdata(const std::string& name) {
  const char* runfiles = std::getenv("TEST_SRCDIR");
  const std::string path =
      (runfiles != nullptr ? std::string(runfiles) + "/gpuprof/" : "") + "report/testdata/" + name;
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  Message message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text.str(), &message)) << path;
  return message;
}

// The records a TracingSession streamed at LEVEL_FULL on an H100 (report/testdata): its
// replayed kernel had no timestamps and its profiling phase a 130-character name.
TEST(ExportChromeTraceTest, ARecordedH100RunHasNoSliceAtZeroAndShortNames) {
  const auto batch = ReadTestdata<api::ActivityBatch>("h100_copy_full_records.txtpb");
  const auto result = ReadTestdata<api::ExperimentResult>("h100_copy_full_result.txtpb");
  ASSERT_GT(batch.records_size(), 100);
  const std::vector<api::ActivityRecord> records(batch.records().begin(), batch.records().end());
  const Struct trace = ParseJson(ExportChromeTrace("exp-h100", records, result));
  int untimed = 0;
  for (const api::ActivityRecord& record : records) untimed += record.start_ns() == 0;
  ASSERT_GT(untimed, 0);
  EXPECT_EQ(Field(Field(trace, "otherData").struct_value(), "untimed_records_left_out")
                .number_value(),
            untimed);
  bool profiling_phase = false;
  for (const auto& [track, slices] : CompleteSlices(trace)) {
    for (const Slice& slice : slices) {
      EXPECT_LE(slice.name.size(), 40u) << slice.name;
      // Only the first record may start at the origin, and none of these lasts 0.
      EXPECT_FALSE(slice.ts == 0 && slice.dur == 0) << slice.name;
      if (slice.name == "profiling") {
        profiling_phase = true;
        EXPECT_THAT(Field(Field(*slice.event, "args").struct_value(), "description").string_value(),
                    ::testing::StartsWith("profiling (kernel replay: "));
      }
    }
  }
  EXPECT_TRUE(profiling_phase);
}

}  // namespace
}  // namespace gpuprof::report
