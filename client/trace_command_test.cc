#include "client/trace_command.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/commands.h"
#include "client/story_command.h"
#include "common/gzip.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace gpuprof::client {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A daemon that stores one experiment's events and replays them from Watch, as gpuprofd does.
class StoredEventsProfiler final : public v1::Profiler::Service {
 public:
  grpc::Status Watch(grpc::ServerContext*, const v1::WatchRequest* request,
                     grpc::ServerWriter<v1::ExperimentEvent>* writer) override {
    absl::MutexLock lock(&mutex_);
    watched.push_back(*request);
    if (request->experiment_id() != experiment_id) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no experiment " + request->experiment_id());
    }
    for (const v1::ExperimentEvent& event : events) {
      if (event.seq() >= request->from_seq()) writer->Write(event);
    }
    return grpc::Status::OK;
  }

  std::string experiment_id = "exp-000042";
  std::vector<v1::ExperimentEvent> events;
  std::vector<v1::WatchRequest> watched;

 private:
  absl::Mutex mutex_;
};

v1::ExperimentEvent Event(const std::string& text) {
  v1::ExperimentEvent event;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &event)) << text;
  return event;
}

class TraceCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    profiler_.events = {
        Event("experiment_id: 'exp-000042' seq: 1 state { state: QUEUED }"),
        Event("experiment_id: 'exp-000042' seq: 2 state { state: RUNNING gpu_ids: 0 }"),
        Event("experiment_id: 'exp-000042' seq: 3 progress { phase: PHASE_WARMUP }"),
        Event("experiment_id: 'exp-000042' seq: 4 activity { "
              "records { kind: KIND_PHASE name: 'warmup' phase: PHASE_WARMUP start_ns: 1000 "
              "end_ns: 90000 } "
              "records { kind: KIND_KERNEL name: 'void copy<4>(float const*, float*)' "
              "phase: PHASE_WARMUP start_ns: 2000 end_ns: 45000 stream_id: 7 grid: [64, 1, 1] "
              "block: [256, 1, 1] registers_per_thread: 16 } dropped_records: 2 }"),
        Event("experiment_id: 'exp-000042' seq: 5 activity { "
              "records { kind: KIND_KERNEL name: 'void copy<4>(float const*, float*)' "
              "phase: PHASE_TIMED start_ns: 100000 end_ns: 141000 stream_id: 7 "
              "metrics { key: 'dram__throughput.avg.pct_of_peak_sustained_elapsed' value: 88 } "
              "metrics { key: 'sm__throughput.avg.pct_of_peak_sustained_elapsed' value: 15 } } "
              "records { kind: KIND_PHASE name: 'timed' phase: PHASE_TIMED start_ns: 90000 "
              "end_ns: 200000 } dropped_records: 1 }"),
        Event("experiment_id: 'exp-000042' seq: 6 result { provenance { gpus { index: 0 "
              "name: 'NVIDIA H200' spec_peak_bandwidth_gbps: 4800 } } "
              "not_collected: 'pc sampling: not collected: test' }"),
        Event("experiment_id: 'exp-000042' seq: 7 state { state: FINISHED }"),
    };
    grpc::ServerBuilder builder;
    builder.RegisterService(&profiler_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Profiler::NewStub(server_->InProcessChannel(grpc::ChannelArguments()));
    env_.out = &out_;
    env_.err = &err_;
    env_.local_user = "alice";
    env_.connect = [this](const ConnectionOptions&) {
      auto channel = server_->InProcessChannel(grpc::ChannelArguments());
      return DaemonStubs{v1::Profiler::NewStub(channel), nullptr};
    };
  }
  void TearDown() override { server_->Shutdown(); }

  int Run(const std::vector<std::string>& args) {
    out_.str("");
    err_.str("");
    return RunGpuprof(args, env_);
  }

  static std::string ReadFile(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    std::stringstream content;
    content << file.rdbuf();
    return content.str();
  }

  // The trace's slices of the copy kernel, after checking it is JSON a strict parser takes.
  static int CopyKernelSlices(const std::string& json) {
    google::protobuf::Struct trace;
    const auto parsed = google::protobuf::util::JsonStringToMessage(json, &trace);
    EXPECT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << json.substr(0, 2000);
    if (!parsed.ok()) return -1;
    int kernels = 0;
    for (const auto& value : trace.fields().at("traceEvents").list_value().values()) {
      const auto& event = value.struct_value().fields();
      if (event.at("ph").string_value() == "X" && event.at("name").string_value() == "copy<4>" &&
          event.at("args").struct_value().fields().at("full_name").string_value() ==
              "void copy<4>(float const*, float*)") {
        ++kernels;
      }
    }
    return kernels;
  }

  static std::string TempPath(const std::string& name) {
    const char* dir = std::getenv("TEST_TMPDIR");
    return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
  }

  StoredEventsProfiler profiler_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Profiler::Stub> stub_;
  ClientEnvironment env_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(TraceCommandTest, FetchGathersEveryBatchTheResultAndTheState) {
  ExperimentActivity activity;
  ASSERT_TRUE(FetchExperimentActivity(*stub_, "exp-000042", activity).ok());
  ASSERT_EQ(profiler_.watched.size(), 1u);
  EXPECT_EQ(profiler_.watched[0].from_seq(), 1);
  EXPECT_EQ(activity.experiment_id, "exp-000042");
  EXPECT_EQ(activity.records.size(), 4u);
  EXPECT_EQ(activity.activity_batches, 2);
  EXPECT_TRUE(activity.has_result);
  EXPECT_EQ(activity.result.provenance().gpus(0).name(), "NVIDIA H200");
  // The result said nothing of drops; the batches did.
  EXPECT_EQ(activity.result.dropped_activity_records(), 3);
  EXPECT_EQ(activity.state, v1::FINISHED);
}

TEST_F(TraceCommandTest, TraceWritesAChromeTraceFile) {
  const std::string path = TempPath("exp.trace.json");
  EXPECT_EQ(Run({"trace", "exp-000042", "-o", path}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), StartsWith("wrote 4 records (2 phases, 2 kernels) of exp-000042 to " +
                                     path + "; open it in https://ui.perfetto.dev"));
  EXPECT_THAT(out_.str(), HasSubstr("note: 3 activity records were dropped"));
  const std::string json = ReadFile(path);
  EXPECT_EQ(CopyKernelSlices(json), 2);
  EXPECT_THAT(json, HasSubstr("\"GPU 0: NVIDIA H200\""));
}

// `-o -`: the trace alone on standard output (a pipe into jq or gzip), the summary on stderr;
// no file named "-".
TEST_F(TraceCommandTest, DashWritesTheTraceToStandardOutput) {
  const std::string cwd_dash = "-";
  std::remove(cwd_dash.c_str());
  EXPECT_EQ(Run({"trace", "exp-000042", "-o", "-"}), kExitOk) << err_.str();
  EXPECT_EQ(CopyKernelSlices(out_.str()), 2);
  EXPECT_THAT(err_.str(), StartsWith("wrote 4 records (2 phases, 2 kernels) of exp-000042 to "
                                     "standard output;"));
  EXPECT_FALSE(std::ifstream(cwd_dash).good());
}

// A .gz path, or --gzip, writes gzip that reads back to the same trace.
TEST_F(TraceCommandTest, GzipForADotGzPathOrTheFlag) {
  const std::string gz_path = TempPath("exp.trace.json.gz");
  EXPECT_EQ(Run({"trace", "exp-000042", "-o", gz_path}), kExitOk) << err_.str();
  const std::string compressed = ReadFile(gz_path);
  ASSERT_GE(compressed.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(compressed[0]), 0x1f);  // gzip's magic
  EXPECT_EQ(static_cast<unsigned char>(compressed[1]), 0x8b);
  const absl::StatusOr<std::string> json = GzipDecompress(compressed);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(CopyKernelSlices(*json), 2);

  EXPECT_EQ(Run({"trace", "exp-000042", "--gzip", "-o", "-"}), kExitOk) << err_.str();
  const absl::StatusOr<std::string> piped = GzipDecompress(out_.str());
  ASSERT_TRUE(piped.ok()) << piped.status();
  EXPECT_EQ(*piped, *json);

  // --gzip without -o names the file ID.trace.json.gz (in the working directory).
  const std::string default_path = "exp-000042.trace.json.gz";
  EXPECT_EQ(Run({"trace", "exp-000042", "--gzip"}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr(" to " + default_path + ";"));
  const absl::StatusOr<std::string> from_default = GzipDecompress(ReadFile(default_path));
  ASSERT_TRUE(from_default.ok()) << from_default.status();
  EXPECT_EQ(*from_default, *json);
  std::remove(default_path.c_str());
}

TEST_F(TraceCommandTest, TraceDefaultsTheFileNameAndReportsRpcErrors) {
  EXPECT_EQ(Run({"trace", "exp-unknown", "--output", TempPath("x.json")}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("NOT_FOUND: no experiment exp-unknown"));
  EXPECT_EQ(Run({"trace", "--help"}), kExitOk);
  EXPECT_THAT(out_.str(), StartsWith("usage: gpuprof trace ID [-o trace.json|trace.json.gz|-]"));
  EXPECT_EQ(Run({"trace", "exp-000042", "-o", "/nonexistent-dir/x.json"}), kExitOtherError);
  EXPECT_THAT(err_.str(), HasSubstr("cannot open /nonexistent-dir/x.json"));
}

TEST_F(TraceCommandTest, StoryPrintsTheExecutionStory) {
  EXPECT_EQ(Run({"story", "exp-000042"}), kExitOk) << err_.str();
  const std::string story = out_.str();
  SCOPED_TRACE(story);
  EXPECT_THAT(story, StartsWith("EXECUTION STORY of exp-000042 on GPU 0 (NVIDIA H200)\n"));
  EXPECT_THAT(story, HasSubstr("── warmup  +0.000 ms"));
  EXPECT_THAT(story, HasSubstr("── timed  +0.089 ms"));
  EXPECT_THAT(story, HasSubstr("copy<4>  41.0 us"));
  EXPECT_THAT(story, HasSubstr("memory-bound: DRAM 88% of peak, SM 15%"));
  EXPECT_THAT(story, HasSubstr("pc sampling: not collected: test"));
  EXPECT_EQ(Run({"help"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("  story "));
  EXPECT_THAT(out_.str(), HasSubstr("  trace "));
}

TEST_F(TraceCommandTest, StoryOfAFailedExperimentSaysSo) {
  profiler_.events.pop_back();
  profiler_.events.push_back(Event(
      "experiment_id: 'exp-000042' seq: 7 state { state: FAILED reason: 'illegal address' }"));
  ExperimentActivity activity;
  ASSERT_TRUE(FetchExperimentActivity(*stub_, "exp-000042", activity).ok());
  EXPECT_THAT(RenderExperimentStory(activity),
              StartsWith("note: the experiment ended failed: illegal address; the story covers "
                         "what it recorded\n"));
  // A reason that carries terminal controls is shown escaped.
  activity.state_reason = "crashed\x1b]0;owned\x07\n";
  EXPECT_THAT(RenderExperimentStory(activity),
              StartsWith("note: the experiment ended failed: crashed\\x1b]0;owned\\x07\\n; the "
                         "story covers what it recorded\n"));
}

}  // namespace
}  // namespace gpuprof::client
