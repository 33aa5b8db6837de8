#include "report/execution_story.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cupti/metric_names.h"
#include "google/protobuf/text_format.h"

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
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

api::ActivityRecord Record(const std::string& text) {
  api::ActivityRecord record;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &record)) << text;
  return record;
}

api::GpuInfo H100() {
  api::GpuInfo gpu;
  gpu.set_index(0);
  gpu.set_name("NVIDIA H100 80GB HBM3");
  gpu.set_spec_peak_bandwidth_gbps(3352);
  gpu.set_spec_peak_bf16_tflops(989);
  gpu.set_spec_peak_fp32_tflops(67);
  return gpu;
}

constexpr char kIndexKernel[] =
    "void gpuprof::kernels::jit::IndexKernel<2, 1, 128, 8, false>(gpuprof::kernels::"
    "IndexKernelParams)";
constexpr char kBlocker[] =
    "void gpuprof::kernels::jit::StreamBlockerKernel<32>(gpuprof::kernels::StreamBlockerParams)";

std::string Kernel(const char* name, int64_t start_ns, int64_t duration_ns, api::Phase phase,
                   const std::string& extra = "") {
  return absl::StrCat("kind: KIND_KERNEL name: '", name, "' start_ns: ", start_ns,
                      " end_ns: ", start_ns + duration_ns, " phase: ", api::Phase_Name(phase),
                      " grid: [1024, 1, 1] block: [128, 1, 1] registers_per_thread: 32 "
                      "dynamic_shared_memory: 0 ",
                      extra);
}

// The shape of an index experiment as the worker records it: allocation with memsets and a
// copy, warm-up, timed samples behind a stream blocker, a profiling replay with metrics and
// stall reasons, verification.
std::vector<api::ActivityRecord> IndexExperimentRecords() {
  std::vector<api::ActivityRecord> records;
  const int64_t t0 = 5'000'000'000;
  auto add = [&](const std::string& text) { records.push_back(Record(text)); };
  add(absl::StrCat("kind: KIND_PHASE phase: PHASE_JIT name: 'jit' start_ns: ", t0,
                   " end_ns: ", t0 + 40'000'000));
  add(absl::StrCat("kind: KIND_PHASE phase: PHASE_ALLOCATION name: 'allocation' start_ns: ",
                   t0 + 40'000'000, " end_ns: ", t0 + 50'000'000));
  add(absl::StrCat("kind: KIND_MEMCPY name: 'memcpy htod' copy_kind: 'htod' bytes: 268435456 "
                   "phase: PHASE_ALLOCATION start_ns: ",
                   t0 + 41'000'000, " end_ns: ", t0 + 46'000'000));
  add(absl::StrCat("kind: KIND_PHASE phase: PHASE_WARMUP name: 'warmup' start_ns: ",
                   t0 + 50'000'000, " end_ns: ", t0 + 51'000'000));
  for (int i = 0; i < 5; ++i) {
    add(Kernel(kIndexKernel, t0 + 50'100'000 + i * 50'000, 41'000, api::PHASE_WARMUP));
  }
  add(absl::StrCat("kind: KIND_PHASE phase: PHASE_TIMED name: 'timed' start_ns: ",
                   t0 + 51'000'000, " end_ns: ", t0 + 61'000'000));
  for (int sample = 0; sample < 4; ++sample) {
    const int64_t base = t0 + 51'100'000 + sample * 2'000'000;
    add(Kernel(kBlocker, base, 500'000, api::PHASE_TIMED, "scaffolding: true"));
    for (int i = 0; i < 50; ++i) {
      add(Kernel(kIndexKernel, base + 500'000 + i * 42'000, 40'000 + (i % 3) * 1'000,
                 api::PHASE_TIMED));
    }
  }
  add(absl::StrCat("kind: KIND_SYNCHRONIZATION name: 'cudaStreamSynchronize' phase: PHASE_TIMED "
                   "start_ns: ",
                   t0 + 59'000'000, " end_ns: ", t0 + 59'100'000));
  add(absl::StrCat("kind: KIND_PHASE phase: PHASE_PROFILING name: 'profiling' start_ns: ",
                   t0 + 61'000'000, " end_ns: ", t0 + 90'000'000));
  add(Kernel(kIndexKernel, t0 + 61'500'000, 43'000, api::PHASE_PROFILING,
             absl::StrCat("metrics { key: '", kDramThroughputPct, "' value: 91.2 } ",
                          "metrics { key: '", kSmThroughputPct, "' value: 21.7 } ",
                          "metrics { key: '", kAchievedOccupancyPct, "' value: 84.9 } ",
                          "metrics { key: '", kL2HitRatePct, "' value: 3.1 } ",
                          "metrics { key: '", kTensorPipePct, "' value: 0 } ",
                          "metrics { key: '", StallMetricName("long_scoreboard"),
                          "' value: 61.5 } ",
                          "metrics { key: '", StallMetricName("selected"), "' value: 9.5 } ",
                          "metrics { key: '", StallMetricName("barrier"), "' value: 20 } ",
                          "metrics { key: '", StallMetricName("wait"), "' value: 9 } ",
                          "metrics { key: '", kStallSampleCountMetric, "' value: 12000 }")));
  add(absl::StrCat("kind: KIND_PHASE phase: PHASE_VERIFICATION name: 'verification' start_ns: ",
                   t0 + 90'000'000, " end_ns: ", t0 + 95'000'000));
  add(absl::StrCat("kind: KIND_MEMCPY name: 'memcpy dtoh' copy_kind: 'dtoh' bytes: 1048576 "
                   "phase: PHASE_VERIFICATION start_ns: ",
                   t0 + 90'500'000, " end_ns: ", t0 + 90'600'000));
  add(absl::StrCat("kind: KIND_OVERHEAD name: 'CUPTI buffer flush' gpu_id: -1 start_ns: ",
                   t0 + 70'000'000, " end_ns: ", t0 + 70'010'000));
  return records;
}

api::ExperimentResult IndexResult() {
  api::ExperimentResult result;
  *result.mutable_provenance()->add_gpus() = H100();
  result.mutable_measurement()->set_bytes_moved(134'217'728);
  result.set_dropped_activity_records(3);
  result.add_not_collected("pc sampling: not collected: example");
  return result;
}

TEST(ShortKernelNameTest, DropsReturnTypeNamespacesAndParameters) {
  EXPECT_EQ(ShortKernelName(kIndexKernel), "IndexKernel<2, 1, 128, 8, false>");
  EXPECT_EQ(ShortKernelName("copy(float const*, float*)"), "copy");
  EXPECT_EQ(ShortKernelName("plain_c_kernel"), "plain_c_kernel");
  EXPECT_EQ(ShortKernelName("void ns::f<ns::T<1>, 2>(int)"), "f<ns::T<1>, 2>");
  // As CUPTI names a kernel in an anonymous namespace (recorded on an H100).
  EXPECT_EQ(ShortKernelName("gpuprof::cupti::testing::(anonymous namespace)::CopyKernel(int4 "
                            "const*, int4*, unsigned long)"),
            "CopyKernel");
}

TEST(ClassifyKernelTest, FromThroughputMetrics) {
  KernelEvidence evidence;
  evidence.median_us = 40;
  evidence.metrics = {{std::string(kDramThroughputPct), 91}, {std::string(kSmThroughputPct), 22}};
  KernelClassification c = ClassifyKernel(evidence, H100());
  EXPECT_EQ(c.bound, Boundedness::kMemory);
  EXPECT_THAT(c.explanation, StartsWith("memory-bound: DRAM 91% of peak, SM 22%"));

  evidence.metrics = {{std::string(kDramThroughputPct), 30}, {std::string(kSmThroughputPct), 85}};
  EXPECT_EQ(ClassifyKernel(evidence, H100()).bound, Boundedness::kCompute);

  evidence.metrics = {{std::string(kDramThroughputPct), 12}, {std::string(kSmThroughputPct), 20}};
  c = ClassifyKernel(evidence, H100());
  EXPECT_EQ(c.bound, Boundedness::kLatency);
  EXPECT_THAT(c.explanation, HasSubstr("neither"));

  // Short and only moderately busy: latency.
  evidence.median_us = 2.5;
  evidence.metrics = {{std::string(kDramThroughputPct), 50}, {std::string(kSmThroughputPct), 20}};
  EXPECT_EQ(ClassifyKernel(evidence, H100()).bound, Boundedness::kLatency);
}

TEST(ClassifyKernelTest, FromBytesAgainstTheRoofline) {
  KernelEvidence evidence;
  evidence.median_us = 100;
  evidence.bytes_per_launch = 300e6;  // 3000 GB/s = 89% of 3352
  KernelClassification c = ClassifyKernel(evidence, H100());
  EXPECT_EQ(c.bound, Boundedness::kMemory);
  EXPECT_THAT(c.explanation, HasSubstr("3000 GB/s = 89% of spec peak"));

  evidence.bytes_per_launch = 30e6;  // 300 GB/s: far under the roof
  EXPECT_EQ(ClassifyKernel(evidence, H100()).bound, Boundedness::kLatency);

  // Right of the ridge (989e12 / 3352e9 = 295 FLOP/byte): compute side.
  evidence.bytes_per_launch = 1e6;
  evidence.flops_per_launch = 80e9;  // 800 TFLOP/s in 100 us
  c = ClassifyKernel(evidence, H100());
  EXPECT_EQ(c.bound, Boundedness::kCompute);
  EXPECT_THAT(c.explanation, HasSubstr("right of the ridge"));
}

TEST(ClassifyKernelTest, WithoutEvidence) {
  KernelEvidence evidence;
  evidence.median_us = 1.5;
  EXPECT_EQ(ClassifyKernel(evidence, H100()).bound, Boundedness::kLatency);
  evidence.median_us = 100;
  const KernelClassification c = ClassifyKernel(evidence, api::GpuInfo());
  EXPECT_EQ(c.bound, Boundedness::kUnknown);
  EXPECT_THAT(c.explanation, HasSubstr("no hardware metrics"));
}

TEST(RenderExecutionStoryTest, TellsThePhasesInOrderWithKernelsCollapsed) {
  const std::string story = RenderExecutionStory("exp-7", IndexExperimentRecords(), IndexResult());
  SCOPED_TRACE(story);
  EXPECT_THAT(story, StartsWith("EXECUTION STORY of exp-7 on GPU 0 (NVIDIA H100 80GB HBM3)\n"));
  EXPECT_THAT(story, HasSubstr("roofline: 3352 GB/s spec peak memory bandwidth, 989 TFLOP/s bf16"));
  // Phases in time order with offsets from the first record.
  const size_t jit = story.find("── jit  +0.000 ms  40 ms  (no GPU work)");
  const size_t allocation = story.find("── allocation  +40.000 ms  10 ms");
  const size_t warmup = story.find("── warmup  +50.000 ms");
  const size_t timed = story.find("── timed  +51.000 ms  10 ms");
  const size_t profiling = story.find("── profiling  +61.000 ms");
  const size_t verification = story.find("└── verification  +90.000 ms");
  ASSERT_NE(jit, std::string::npos);
  ASSERT_NE(allocation, std::string::npos);
  ASSERT_NE(warmup, std::string::npos);
  ASSERT_NE(timed, std::string::npos);
  ASSERT_NE(profiling, std::string::npos);
  ASSERT_NE(verification, std::string::npos);
  EXPECT_LT(jit, allocation);
  EXPECT_LT(allocation, warmup);
  EXPECT_LT(warmup, timed);
  EXPECT_LT(timed, profiling);
  EXPECT_LT(profiling, verification);

  // 200 timed launches collapsed into one line, marked as the hotspot.
  EXPECT_THAT(story, HasSubstr("IndexKernel<2, 1, 128, 8, false> x 200, median 41.0 us, total "
                               "8.2 ms"));
  EXPECT_THAT(story, HasSubstr("<- HOTSPOT"));
  EXPECT_THAT(story, HasSubstr("IndexKernel<2, 1, 128, 8, false> x 5, median 41.0 us"));
  EXPECT_THAT(story, HasSubstr("launch: grid [1024,1,1] block [128,1,1], 32 regs/thread"));
  // Metrics and stalls of the profiling replay, shown for the timed launches too.
  EXPECT_THAT(story, HasSubstr("hardware (profiling replay): DRAM 91%, SM 22%, occupancy 85%, "
                               "L2 hit 3%, tensor pipe 0%"));
  EXPECT_THAT(story, HasSubstr("warp stalls: long_scoreboard 62%, barrier 20%, selected 10%, "
                               "wait 9% (12000 PC samples)"));
  EXPECT_THAT(story, HasSubstr("memory-bound: DRAM 91% of peak, SM 22%"));
  // The blocker is named for what it is, not classified.
  EXPECT_THAT(story, HasSubstr("StreamBlockerKernel<32> x 4"));
  EXPECT_THAT(story, HasSubstr("measurement scaffolding"));
  // Copies with their bandwidth, waits, overhead, dropped records, not collected.
  EXPECT_THAT(story, HasSubstr("memcpy htod  5 ms  @ +41.000 ms, 256.0 MiB at 53.7 GB/s"));
  EXPECT_THAT(story, HasSubstr("CPU waits: cudaStreamSynchronize  100.0 us"));
  EXPECT_THAT(story, HasSubstr("CUPTI overhead: 1 records, 10.0 us"));
  EXPECT_THAT(story, HasSubstr("Dropped: 3 activity records"));
  EXPECT_THAT(story, HasSubstr("Not collected:\n  - pc sampling: not collected: example\n"));
}

TEST(RenderExecutionStoryTest, ClassifiesFromBytesWhenNoMetrics) {
  std::vector<api::ActivityRecord> records;
  for (const api::ActivityRecord& record : IndexExperimentRecords()) {
    if (record.phase() == api::PHASE_PROFILING) continue;
    records.push_back(record);
  }
  const std::string story = RenderExecutionStory("exp-8", records, IndexResult());
  SCOPED_TRACE(story);
  EXPECT_THAT(story, Not(HasSubstr("hardware")));
  // 134 MB in 41 us = 3274 GB/s = 98% of 3352.
  EXPECT_THAT(story, HasSubstr("memory-bound: 0 FLOP/byte is left of the ridge (295); 3274 GB/s "
                               "= 98% of spec peak bandwidth"));
}

TEST(RenderExecutionStoryTest, NoRecords) {
  const std::string story = RenderExecutionStory("exp-9", {}, api::ExperimentResult());
  EXPECT_THAT(story, HasSubstr("no activity records"));
}

TEST(RenderExecutionStoryTest, RecordsWithoutMarkersStillGrouped) {
  std::vector<api::ActivityRecord> records = {
      Record(Kernel("k1", 1000, 5000, api::PHASE_TIMED)),
      Record(Kernel("k1", 7000, 5000, api::PHASE_TIMED)),
      Record(Kernel("k2", 20000, 100, api::PHASE_UNSPECIFIED)),
  };
  const std::string story = RenderExecutionStory("exp-10", records, api::ExperimentResult());
  SCOPED_TRACE(story);
  EXPECT_THAT(story, HasSubstr("── timed  +0.000 ms"));
  EXPECT_THAT(story, HasSubstr("k1 x 2, median 5.00 us, total 10.0 us"));
  EXPECT_THAT(story, HasSubstr("── outside any phase  +0.019 ms"));
  EXPECT_THAT(story, HasSubstr("latency-bound: at 0.10 us"));
}

TEST(RenderExecutionStoryTest, ScaffoldingIsTheFlaggedRecordsWhateverTheirName) {
  std::vector<api::ActivityRecord> records;
  for (api::ActivityRecord record : IndexExperimentRecords()) {
    // As an older worker recorded them: no flag, so the blocker-named kernel is the workload's.
    record.clear_scaffolding();
    records.push_back(record);
  }
  const std::string story = RenderExecutionStory("exp-11", records, IndexResult());
  SCOPED_TRACE(story);
  EXPECT_THAT(story, Not(HasSubstr("measurement scaffolding")));
  EXPECT_THAT(story, HasSubstr("Per sample (timed): 2 workload kernels"));

  // A flagged record of any name is scaffolding.
  std::vector<api::ActivityRecord> flagged = {
      Record(Kernel("SomeHelperKernel", 1000, 500, api::PHASE_TIMED, "scaffolding: true")),
      Record(Kernel(kIndexKernel, 2000, 41'000, api::PHASE_TIMED)),
      Record("kind: KIND_MEMSET name: 'memset' bytes: 104857600 start_ns: 500 end_ns: 900 "
             "phase: PHASE_TIMED scaffolding: true"),
  };
  const std::string flagged_story = RenderExecutionStory("exp-12", flagged, IndexResult());
  SCOPED_TRACE(flagged_story);
  EXPECT_THAT(flagged_story, HasSubstr("SomeHelperKernel  500 ns"));
  EXPECT_THAT(flagged_story, HasSubstr("measurement scaffolding: holds the stream"));
  EXPECT_THAT(flagged_story, HasSubstr("(measurement scaffolding: the cold-L2 flush)"));
  EXPECT_THAT(flagged_story, HasSubstr("Kernel time: 41.0 us; hotspot IndexKernel"));
  EXPECT_THAT(flagged_story, Not(HasSubstr("Per sample")));
}

// Split-K attention decode: per sample the main kernel and its merge kernel.
TEST(RenderExecutionStoryTest, TwoKernelsPerSampleEachWithItsShare) {
  constexpr char kDecode[] =
      "void gpuprof::kernels::attention::DecodeSplitKKernel<128, 4>(gpuprof::kernels::"
      "DecodeParams)";
  constexpr char kMerge[] =
      "void gpuprof::kernels::attention::MergeStatesKernel<128>(gpuprof::kernels::MergeParams)";
  std::vector<api::ActivityRecord> records = {
      Record("kind: KIND_PHASE phase: PHASE_TIMED name: 'timed' start_ns: 1000000 "
             "end_ns: 9000000")};
  for (int sample = 0; sample < 10; ++sample) {
    const int64_t base = 1'100'000 + sample * 200'000;
    records.push_back(
        Record(Kernel(kBlocker, base, 20'000, api::PHASE_TIMED, "scaffolding: true")));
    records.push_back(Record(Kernel(kDecode, base + 20'000, 45'000, api::PHASE_TIMED)));
    records.push_back(Record(Kernel(kMerge, base + 65'000, 5'000, api::PHASE_TIMED)));
  }
  api::ExperimentResult result;
  *result.mutable_provenance()->add_gpus() = H100();
  api::GpuMeasurement& measurement = *result.mutable_measurement();
  measurement.mutable_kernel_time()->set_samples(10);
  measurement.mutable_kernel_time()->set_median_us(50);
  measurement.set_bytes_moved(150'000'000);  // 3000 GB/s in 50 us
  measurement.set_bandwidth_gbps(3000);
  measurement.set_pct_of_spec_peak_bandwidth(100.0 * 3000 / 3352);
  measurement.set_flops(2e9);
  measurement.set_tflops(40);
  measurement.set_pct_of_spec_peak_flops(4);
  const std::string story = RenderExecutionStory("split-k", records, result);
  SCOPED_TRACE(story);
  EXPECT_THAT(story, StartsWith("EXECUTION STORY of split-k on GPU 0 (NVIDIA H100 80GB HBM3)\n"));
  EXPECT_THAT(story, HasSubstr("DecodeSplitKKernel<128, 4> x 10, median 45.0 us, total 450.0 us"));
  EXPECT_THAT(story, HasSubstr("MergeStatesKernel<128> x 10, median 5.00 us, total 50.0 us"));
  EXPECT_THAT(story, HasSubstr("Per sample (timed, 10 samples): 2 workload kernels\n"
                               "  DecodeSplitKKernel<128, 4> x 1 per sample, median 45.0 us, 90% "
                               "of the sample's kernel time\n"
                               "  MergeStatesKernel<128> x 1 per sample, median 5.00 us, 10% of "
                               "the sample's kernel time\n"));
  EXPECT_THAT(story, HasSubstr("  result per sample: median 50.0 us; 3000 GB/s (bytes read + "
                               "written) = 89% of spec peak; 40.0 TFLOP/s = 4% of spec peak\n"));
  EXPECT_THAT(story, HasSubstr("  the sample as a whole: memory-bound:"));
  // The sample's bytes are not laid on either kernel alone: only the sample is classified.
  EXPECT_THAT(story, HasSubstr("the sample as a whole: memory-bound: 13.3 FLOP/byte is left of "
                               "the ridge (295); 3000 GB/s = 89% of spec peak bandwidth"));
  EXPECT_EQ(story.find("GB/s = 89%"), story.rfind("GB/s = 89%"));
  EXPECT_THAT(story, HasSubstr("Kernel time: 500.0 us; hotspot DecodeSplitKKernel<128, 4> (90%)"));
}

// NCCL ranks driven from one process: one record stream per GPU.
TEST(RenderExecutionStoryTest, RecordsFromTwoGpus) {
  constexpr char kAllReduce[] = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage)";
  std::vector<api::ActivityRecord> records = {
      Record("kind: KIND_PHASE phase: PHASE_TIMED name: 'timed' gpu_id: 0 start_ns: 1000000 "
             "end_ns: 9000000")};
  for (int sample = 0; sample < 5; ++sample) {
    const int64_t base = 1'100'000 + sample * 200'000;
    for (int gpu = 0; gpu < 2; ++gpu) {
      const std::string on_gpu = absl::StrCat("gpu_id: ", gpu, " stream_id: ", 7 + gpu);
      records.push_back(Record(Kernel(kBlocker, base, 10'000, api::PHASE_TIMED,
                                      absl::StrCat(on_gpu, " scaffolding: true"))));
      records.push_back(Record(Kernel(kAllReduce, base + 10'000, gpu == 0 ? 80'000 : 100'000,
                                      api::PHASE_TIMED, on_gpu)));
    }
  }
  api::ExperimentResult result;
  *result.mutable_provenance()->add_gpus() = H100();
  api::GpuInfo second = H100();
  second.set_index(1);
  *result.mutable_provenance()->add_gpus() = second;
  const std::string story = RenderExecutionStory("nccl-2", records, result);
  SCOPED_TRACE(story);
  EXPECT_THAT(story, StartsWith("EXECUTION STORY of nccl-2 on GPU 0 (NVIDIA H100 80GB HBM3), "
                                "GPU 1 (NVIDIA H100 80GB HBM3)\n"));
  // One node per GPU in the phase, each with its own kernels.
  const size_t gpu0 = story.find("├── GPU 0 (NVIDIA H100 80GB HBM3)  (GPU busy 450.0 us)");
  const size_t gpu1 = story.find("└── GPU 1 (NVIDIA H100 80GB HBM3)  (GPU busy 550.0 us)");
  ASSERT_NE(gpu0, std::string::npos);
  ASSERT_NE(gpu1, std::string::npos);
  const size_t fast = story.find("ncclDevKernel_AllReduce_Sum_f32_RING_LL x 5, median 80.0 us");
  const size_t slow = story.find("ncclDevKernel_AllReduce_Sum_f32_RING_LL x 5, median 100.0 us");
  ASSERT_NE(fast, std::string::npos);
  ASSERT_NE(slow, std::string::npos);
  EXPECT_LT(gpu0, fast);
  EXPECT_LT(fast, gpu1);
  EXPECT_LT(gpu1, slow);
  EXPECT_THAT(story, HasSubstr("Per GPU (workload kernel time in the timed phase):\n"
                               "  GPU 0 (NVIDIA H100 80GB HBM3): 400.0 us over 5 launches\n"
                               "  GPU 1 (NVIDIA H100 80GB HBM3): 500.0 us over 5 launches  <- "
                               "slowest (25% over the fastest)\n"));
  EXPECT_THAT(story, HasSubstr("  GPU 1: ncclDevKernel_AllReduce_Sum_f32_RING_LL x 1 per sample"));
  // The ranks start every all-reduce together here: no skew, and no GPU named as the last.
  EXPECT_THAT(story, HasSubstr("  ncclDevKernel_AllReduce_Sum_f32_RING_LL: the GPUs start each "
                               "of its 5 launches within 0 ns of each other (median), at most "
                               "0 ns\n"));
}

template <typename Message>
Message ReadTestData(const std::string& name) {
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

// Records a TracingSession at LEVEL_FULL streamed on an H100 (tracing_session_gpu_test,
// 2026-11-21): a 256 MiB copy kernel, 5 warm-up and 100 timed launches, a profiling replay and a
// PC-sampled launch.
TEST(RenderExecutionStoryTest, RecordedH100CopyAtFullLevel) {
  const auto batch = ReadTestData<api::ActivityBatch>("h100_copy_full_records.txtpb");
  auto result = ReadTestData<api::ExperimentResult>("h100_copy_full_result.txtpb");
  ASSERT_GT(batch.records_size(), 100);
  // The GPU's spec as the daemon's probe fills it for an H100 SXM (HBM3, 5120-bit at 2619 MHz).
  result.mutable_provenance()->mutable_gpus(0)->set_spec_peak_bandwidth_gbps(3352);
  const std::vector<api::ActivityRecord> records(batch.records().begin(), batch.records().end());
  const std::string story = RenderExecutionStory("h100-copy", records, result);
  SCOPED_TRACE(story);
  EXPECT_THAT(story, StartsWith("EXECUTION STORY of h100-copy on GPU 0 (NVIDIA H100 80GB HBM3)"));
  EXPECT_THAT(story, HasSubstr("── allocation  +0.000 ms"));
  EXPECT_THAT(story, HasSubstr("memset  82.1 us  @ +0.120 ms, 256.0 MiB at 3269.1 GB/s"));
  EXPECT_THAT(story, HasSubstr("CopyKernel x 5, median 189.8 us"));
  EXPECT_THAT(story, HasSubstr("CopyKernel x 100, median 193.4 us, total 19.3 ms"));
  EXPECT_THAT(story, HasSubstr("<- HOTSPOT (94% of kernel time)"));
  EXPECT_THAT(story, HasSubstr("── profiling (kernel replay: each kernel ran 8 times (8 passes) "
                               "to read 5 metrics on GH100"));
  EXPECT_THAT(story, HasSubstr("hardware (profiling replay): DRAM 85%, SM 5%, occupancy 96%, "
                               "L2 hit 52%, tensor pipe 0%"));
  EXPECT_THAT(story, HasSubstr("warp stalls: long_scoreboard 99%, wait 1%"));
  EXPECT_THAT(story, HasSubstr("memory-bound: DRAM 85% of peak, SM 5%"));
  EXPECT_THAT(story, HasSubstr("── verification  +1389.599 ms"));
  EXPECT_THAT(story, HasSubstr("Kernel time: 20.5 ms; hotspot CopyKernel (100%)"));
  EXPECT_THAT(story, Not(HasSubstr("Dropped")));
}

}  // namespace
}  // namespace gpuprof::report
