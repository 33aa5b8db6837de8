// A TracingSession at LEVEL_FULL around a small workload on a real GPU, as a runner drives it:
// phases, streamed batches, a profiling replay, the launch calls with their kernels'
// correlation ids (and the trace's arrows between them), the result's dropped count and
// not_collected lines. Prints the execution story; with GPUPROF_RECORD_DIR set, also writes the records and
// result it saw (text protos) so that they can serve as recorded test data.
#include "cupti/tracing_session.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "report/execution_story.h"
#include "report/trace_export.h"
#include "cupti/metric_names.h"
#include "cupti/testing/copy_kernel.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

namespace gpuprof::cupti {
namespace {

namespace api = ::gpuprof::v1;

constexpr size_t kBytes = size_t{256} << 20;

TEST(TracingSessionGpuTest, FullLevelAroundACopyWorkload) {
  void* source = nullptr;
  void* destination = nullptr;
  ASSERT_EQ(cudaMalloc(&source, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&destination, kBytes), cudaSuccess);
  cudaDeviceProp properties{};
  ASSERT_EQ(cudaGetDeviceProperties(&properties, 0), cudaSuccess);
  const int blocks = properties.multiProcessorCount * 8;

  std::vector<api::ExperimentEvent> events;
  // GPUPROF_TRACE_LEVEL=metrics runs without PC sampling.
  api::TracingOptions options;
  const char* level = std::getenv("GPUPROF_TRACE_LEVEL");
  options.set_level(level != nullptr && std::string(level) == "metrics"
                        ? api::TracingOptions::LEVEL_METRICS
                        : api::TracingOptions::LEVEL_FULL);
  TracingSession session(options, {0}, [&](const api::ExperimentEvent& event) {
    events.push_back(event);
  }, {.max_records_per_event = 50});

  auto launch = [&](int count) -> absl::Status {
    for (int i = 0; i < count; ++i) {
      if (cupti::testing::LaunchCopyKernel(source, destination, kBytes, blocks, nullptr) !=
          cudaSuccess) {
        return absl::InternalError("launch failed");
      }
    }
    return cudaDeviceSynchronize() == cudaSuccess ? absl::OkStatus()
                                                  : absl::InternalError("sync failed");
  };
  session.OnPhase(api::PHASE_ALLOCATION);
  ASSERT_EQ(cudaMemset(source, 1, kBytes), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  session.OnPhase(api::PHASE_WARMUP);
  ASSERT_TRUE(launch(5).ok());
  session.OnPhase(api::PHASE_TIMED);
  ASSERT_TRUE(launch(100).ok());
  ASSERT_TRUE(session.ProfileKernels([&] { return launch(1); }).ok());
  session.OnPhase(api::PHASE_VERIFICATION);
  std::vector<char> host(1 << 20);
  ASSERT_EQ(cudaMemcpy(host.data(), destination, host.size(), cudaMemcpyDeviceToHost), cudaSuccess);

  api::ExperimentResult result;
  api::GpuInfo* gpu = result.mutable_provenance()->add_gpus();
  gpu->set_index(0);
  gpu->set_name(properties.name);
  result.mutable_measurement()->set_bytes_moved(2 * static_cast<int64_t>(kBytes));
  session.Finish(result);

  std::vector<api::ActivityRecord> records;
  for (const api::ExperimentEvent& event : events) {
    ASSERT_TRUE(event.has_activity());
    EXPECT_LE(event.activity().records_size(), 50);
    for (const api::ActivityRecord& record : event.activity().records()) records.push_back(record);
  }
  int timed = 0, profiled = 0, with_metrics = 0, with_stalls = 0;
  for (const api::ActivityRecord& record : records) {
    if (record.kind() != api::ActivityRecord::KIND_KERNEL) continue;
    if (record.phase() == api::PHASE_TIMED) ++timed;
    if (record.phase() != api::PHASE_PROFILING) continue;
    ++profiled;
    if (record.metrics().count(std::string(cupti::kDramThroughputPct))) ++with_metrics;
    if (record.metrics().count(std::string(cupti::kStallSampleCountMetric))) ++with_stalls;
  }
  EXPECT_EQ(timed, 100);
  EXPECT_GE(profiled, 1);

  // Every timed kernel's launch call is recorded on the host, with the kernel's correlation id,
  // and the trace draws an arrow from each launch to its kernel.
  std::map<uint32_t, const api::ActivityRecord*> launch_by_correlation;
  int launches = 0;
  for (const api::ActivityRecord& record : records) {
    if (record.kind() != api::ActivityRecord::KIND_LAUNCH) continue;
    ++launches;
    EXPECT_NE(record.correlation_id(), 0u) << record.name();
    EXPECT_TRUE(launch_by_correlation.emplace(record.correlation_id(), &record).second)
        << "two launch records of correlation id " << record.correlation_id();
  }
  int timed_with_launch = 0;
  std::set<uint32_t> launch_threads;
  for (const api::ActivityRecord& record : records) {
    if (record.kind() != api::ActivityRecord::KIND_KERNEL || record.phase() != api::PHASE_TIMED) {
      continue;
    }
    const auto found = launch_by_correlation.find(record.correlation_id());
    if (found == launch_by_correlation.end()) continue;
    const api::ActivityRecord& launch = *found->second;
    ++timed_with_launch;
    EXPECT_THAT(launch.name(), ::testing::StartsWith("cudaLaunchKernel"));
    EXPECT_EQ(launch.phase(), api::PHASE_TIMED);
    EXPECT_GT(launch.start_ns(), 0);
    EXPECT_LE(launch.start_ns(), launch.end_ns());
    EXPECT_LE(launch.start_ns(), record.start_ns()) << "a kernel starts after its launch";
    launch_threads.insert(launch.thread_id());
  }
  EXPECT_EQ(timed_with_launch, 100);
  EXPECT_EQ(launch_threads.size(), 1u) << "the timed kernels are launched from one thread";
  const std::string trace = report::ExportChromeTrace("gpu-test", records, result);
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(trace, &parsed).ok());
  const auto& other = parsed.fields().at("otherData").struct_value().fields();
  EXPECT_GE(other.at("launch_flows").number_value(), timed_with_launch);
  int flow_starts = 0, flow_finishes = 0;
  for (const auto& event : parsed.fields().at("traceEvents").list_value().values()) {
    const std::string& ph = event.struct_value().fields().at("ph").string_value();
    flow_starts += ph == "s";
    flow_finishes += ph == "f";
  }
  EXPECT_EQ(flow_starts, other.at("launch_flows").number_value());
  EXPECT_EQ(flow_finishes, flow_starts);
  std::printf("launch records: %d, timed kernels with their launch: %d, trace flows: %d, "
              "untimed records left out of the trace: %.0f\n",
              launches, timed_with_launch, flow_starts,
              other.at("untimed_records_left_out").number_value());
  EXPECT_EQ(result.dropped_activity_records(), 0);
  const bool metrics_refused = std::any_of(
      result.not_collected().begin(), result.not_collected().end(), [](const std::string& line) {
        return line.rfind("hardware metrics: not collected", 0) == 0;
      });
  if (!metrics_refused) {
    EXPECT_GE(with_metrics, 1);
    EXPECT_EQ(result.kernel_config().count("hardware_metrics_replay"), 1u);
  }
  std::printf("events: %zu, records: %zu, profiled kernel records: %d (metrics %d, stalls %d)\n",
              events.size(), records.size(), profiled, with_metrics, with_stalls);
  for (const std::string& line : result.not_collected()) std::printf("not collected: %s\n", line.c_str());
  std::printf("%s", report::RenderExecutionStory("gpu-test", records, result).c_str());

  if (const char* dir = std::getenv("GPUPROF_RECORD_DIR"); dir != nullptr) {
    api::ActivityBatch all;
    for (const api::ActivityRecord& record : records) *all.add_records() = record;
    std::string text;
    google::protobuf::TextFormat::PrintToString(all, &text);
    const std::string suffix = api::TracingOptions::Level_Name(options.level());
    std::ofstream(absl::StrCat(dir, "/records_", suffix, ".txtpb")) << text;
    google::protobuf::TextFormat::PrintToString(result, &text);
    std::ofstream(absl::StrCat(dir, "/result_", suffix, ".txtpb")) << text;
  }
  cudaFree(source);
  cudaFree(destination);
}

}  // namespace
}  // namespace gpuprof::cupti
