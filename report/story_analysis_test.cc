#include "report/story_analysis.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "cupti/metric_names.h"
#include "google/protobuf/text_format.h"
#include "report/story_timeline.h"

namespace gpuprof::report {
namespace {

namespace api = ::gpuprof::v1;
using ::gpuprof::cupti::kDramThroughputPct;
using ::gpuprof::cupti::kSmThroughputPct;
using ::gpuprof::cupti::kStallSampleCountMetric;
using ::gpuprof::cupti::StallMetricName;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;
using ::testing::StartsWith;

api::ActivityRecord Record(const std::string& text) {
  api::ActivityRecord record;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &record)) << text;
  return record;
}

std::string Kernel(const std::string& name, int64_t start_ns, int64_t duration_ns,
                   const std::string& extra = "") {
  return absl::StrCat("kind: KIND_KERNEL name: '", name, "' start_ns: ", start_ns,
                      " end_ns: ", start_ns + duration_ns, " phase: PHASE_TIMED ", extra);
}

api::GpuInfo H100(int32_t index) {
  api::GpuInfo gpu;
  gpu.set_index(index);
  gpu.set_name("NVIDIA H100 80GB HBM3");
  gpu.set_spec_peak_bandwidth_gbps(3352);
  gpu.set_spec_peak_bf16_tflops(989);
  return gpu;
}

// Split-K decode: per sample a blocker, the main kernel (40 us) and its merge kernel (10 us).
std::vector<api::ActivityRecord> SplitKRecords(int samples) {
  std::vector<api::ActivityRecord> records;
  records.push_back(
      Record("kind: KIND_PHASE phase: PHASE_TIMED name: 'timed' start_ns: 1000 end_ns: 9000000"));
  for (int sample = 0; sample < samples; ++sample) {
    const int64_t base = 10'000 + sample * 100'000;
    records.push_back(Record(Kernel("StreamBlockerKernel<32>", base, 5'000, "scaffolding: true")));
    records.push_back(Record(Kernel("DecodeSplitKKernel", base + 5'000, 40'000)));
    records.push_back(Record(Kernel("MergeStatesKernel", base + 45'000, 10'000)));
  }
  return records;
}

TEST(AnalyseStoryTest, EveryWorkloadKernelOfASampleWithItsShare) {
  const std::vector<api::ActivityRecord> records = SplitKRecords(4);
  const StoryTimeline timeline = BuildStoryTimeline(records);
  api::ExperimentResult result;
  *result.mutable_provenance()->add_gpus() = H100(0);
  // 100 MB in 50 us per sample: 2000 GB/s = 60% of 3352.
  result.mutable_measurement()->set_bytes_moved(100'000'000);
  result.mutable_measurement()->mutable_kernel_time()->set_median_us(50);
  const StoryAnalysis analysis = AnalyseStory(timeline, result);

  EXPECT_EQ(analysis.samples, 4) << "one blocker per sample";
  ASSERT_EQ(analysis.timed_kernels.size(), 2u);
  EXPECT_EQ(analysis.timed_kernels[0].group->name, "DecodeSplitKKernel");
  EXPECT_DOUBLE_EQ(analysis.timed_kernels[0].share_pct, 80);
  EXPECT_DOUBLE_EQ(analysis.timed_kernels[0].launches_per_sample, 1);
  EXPECT_EQ(analysis.timed_kernels[1].group->name, "MergeStatesKernel");
  EXPECT_DOUBLE_EQ(analysis.timed_kernels[1].share_pct, 20);
  EXPECT_TRUE(analysis.gpus.empty()) << "one GPU";

  // The result describes the sample, not either kernel.
  ASSERT_TRUE(analysis.multi_kernel_sample());
  EXPECT_NEAR(analysis.achieved->bandwidth_gbps, 2000, 1e-6);
  EXPECT_NEAR(analysis.achieved->pct_of_spec_peak_bandwidth, 100.0 * 2000 / 3352, 1e-6);
  EXPECT_EQ(analysis.achieved->classification.bound, Boundedness::kMemory);
  for (const TimedKernel& kernel : analysis.timed_kernels) {
    EXPECT_THAT(analysis.kernels.at(kernel.group).classification.explanation,
                Not(HasSubstr("GB/s")))
        << "the sample's bytes are not one kernel's";
  }
  // The blocker is not the workload's.
  EXPECT_EQ(analysis.kernels.size(), 2u);
  EXPECT_EQ(analysis.kernel_time_ns, 4 * 50'000);
  ASSERT_NE(analysis.hotspot, nullptr);
  EXPECT_EQ(analysis.hotspot->name, "DecodeSplitKKernel");
  EXPECT_DOUBLE_EQ(analysis.hotspot_group_pct, 80);
}

TEST(AnalyseStoryTest, SamplesFromTheResultWhenItHasThem) {
  const std::vector<api::ActivityRecord> records = SplitKRecords(2);
  const StoryTimeline timeline = BuildStoryTimeline(records);
  api::ExperimentResult result;
  result.mutable_measurement()->mutable_kernel_time()->set_samples(1);
  const StoryAnalysis analysis = AnalyseStory(timeline, result);
  EXPECT_EQ(analysis.samples, 1);
  EXPECT_DOUBLE_EQ(analysis.timed_kernels[0].launches_per_sample, 2);
}

TEST(AnalyseStoryTest, OneLinePerGpuWithTheSlowestNamed) {
  std::vector<api::ActivityRecord> records = {
      Record("kind: KIND_PHASE phase: PHASE_TIMED name: 'timed' start_ns: 1000 end_ns: 900000")};
  for (int sample = 0; sample < 3; ++sample) {
    const int64_t base = 10'000 + sample * 100'000;
    for (int gpu = 0; gpu < 2; ++gpu) {
      const std::string on_gpu = absl::StrCat("gpu_id: ", gpu);
      records.push_back(Record(Kernel("StreamBlockerKernel<32>", base, 2'000,
                                      absl::StrCat(on_gpu, " scaffolding: true"))));
      // Rank 1 is 25% slower.
      records.push_back(Record(Kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", base + 2'000,
                                      gpu == 0 ? 40'000 : 50'000, on_gpu)));
    }
  }
  const StoryTimeline timeline = BuildStoryTimeline(records);
  api::ExperimentResult result;
  *result.mutable_provenance()->add_gpus() = H100(0);
  *result.mutable_provenance()->add_gpus() = H100(1);
  const StoryAnalysis analysis = AnalyseStory(timeline, result);

  EXPECT_EQ(analysis.samples, 3);
  ASSERT_EQ(analysis.gpus.size(), 2u);
  EXPECT_EQ(analysis.gpus[0].gpu_id, 0);
  EXPECT_EQ(analysis.gpus[0].kernel_ns, 120'000);
  EXPECT_EQ(analysis.gpus[0].launches, 3);
  EXPECT_FALSE(analysis.gpus[0].slowest);
  EXPECT_EQ(analysis.gpus[1].kernel_ns, 150'000);
  EXPECT_TRUE(analysis.gpus[1].slowest);
  // Each rank's kernel is the whole of its GPU's time.
  ASSERT_EQ(analysis.timed_kernels.size(), 2u);
  EXPECT_DOUBLE_EQ(analysis.timed_kernels[0].share_pct, 100);
  EXPECT_DOUBLE_EQ(analysis.timed_kernels[1].share_pct, 100);
  EXPECT_TRUE(analysis.multi_kernel_sample());
}

TEST(AnalyseStoryTest, HowFarApartTheGpusStartTheSameKernel) {
  std::vector<api::ActivityRecord> records = {
      Record("kind: KIND_PHASE phase: PHASE_TIMED name: 'timed' start_ns: 1000 end_ns: 900000")};
  // GPU 1 starts each all-reduce 1, 3, then 2 us after GPU 0.
  const int64_t lag_ns[] = {1'000, 3'000, 2'000};
  for (int sample = 0; sample < 3; ++sample) {
    const int64_t base = 10'000 + sample * 100'000;
    for (int gpu = 0; gpu < 2; ++gpu) {
      records.push_back(
          Record(Kernel("ncclDevKernel_AllReduce", base + (gpu == 1 ? lag_ns[sample] : 0), 40'000,
                        absl::StrCat("gpu_id: ", gpu))));
    }
    // A kernel on one GPU only has no skew.
    records.push_back(Record(Kernel("local_only", base + 50'000, 1'000, "gpu_id: 0")));
  }
  const StoryTimeline timeline = BuildStoryTimeline(records);
  api::ExperimentResult result;
  *result.mutable_provenance()->add_gpus() = H100(0);
  *result.mutable_provenance()->add_gpus() = H100(1);
  const StoryAnalysis analysis = AnalyseStory(timeline, result);
  ASSERT_EQ(analysis.skews.size(), 1u);
  const LaunchSkew& skew = analysis.skews.front();
  EXPECT_EQ(skew.kernel, "ncclDevKernel_AllReduce");
  EXPECT_EQ(skew.launches, 3);
  EXPECT_DOUBLE_EQ(skew.median_ns, 2'000);
  EXPECT_EQ(skew.max_ns, 3'000);
  EXPECT_EQ(skew.latest_gpu, 1);

  // One GPU: nothing to compare.
  std::vector<api::ActivityRecord> single = {records[0], records[1], records[3]};
  EXPECT_TRUE(AnalyseStory(BuildStoryTimeline(single), result).skews.empty());
}

TEST(AnalyseStoryTest, ScaffoldingByTheFlagOnly) {
  // A workload kernel that happens to be named like the blocker, and no flagged record.
  const std::vector<api::ActivityRecord> records = {
      Record(Kernel("void gpuprof::measure::StreamBlockerKernel<32>(Params)", 1000, 41'000)),
  };
  const StoryTimeline timeline = BuildStoryTimeline(records);
  api::ExperimentResult result;
  *result.mutable_provenance()->add_gpus() = H100(0);
  result.mutable_measurement()->set_bytes_moved(134'217'728);
  const StoryAnalysis analysis = AnalyseStory(timeline, result);
  ASSERT_EQ(analysis.timed_kernels.size(), 1u);
  EXPECT_EQ(analysis.kernel_time_ns, 41'000);
  EXPECT_FALSE(analysis.multi_kernel_sample());
  // The sole kernel: the result's bytes are its own.
  EXPECT_THAT(analysis.kernels.at(analysis.timed_kernels[0].group).classification.explanation,
              StartsWith("memory-bound: 0 FLOP/byte is left of the ridge (295); 3274 GB/s"));
}

TEST(AnalyseStoryTest, MetricsAndStallsBorrowedFromTheProfilingReplay) {
  const std::vector<api::ActivityRecord> records = {
      Record(Kernel("k", 1000, 50'000)),
      Record(absl::StrCat(
          "kind: KIND_KERNEL name: 'k' phase: PHASE_PROFILING metrics { key: '", kDramThroughputPct,
          "' value: 20 } metrics { key: '", kSmThroughputPct, "' value: 85 } metrics { key: '",
          StallMetricName("math_pipe"), "' value: 70 } metrics { key: '", StallMetricName("wait"),
          "' value: 30 } metrics { key: '", kStallSampleCountMetric, "' value: 500 }")),
  };
  const StoryTimeline timeline = BuildStoryTimeline(records);
  const StoryAnalysis analysis = AnalyseStory(timeline, api::ExperimentResult());
  ASSERT_EQ(analysis.timed_kernels.size(), 1u);
  const KernelFindings& findings = analysis.kernels.at(analysis.timed_kernels[0].group);
  EXPECT_TRUE(findings.metrics_from_replay);
  EXPECT_THAT(findings.top_stalls, ElementsAre(Pair("math_pipe", 70), Pair("wait", 30)));
  EXPECT_EQ(findings.stall_samples, 500);
  EXPECT_EQ(findings.classification.bound, Boundedness::kCompute);
  // The replay is not the hotspot even when it is the only other group.
  EXPECT_EQ(analysis.hotspot, analysis.timed_kernels[0].group);
}

TEST(ClassifyKernelTest, FromThroughputMetricsBytesOrNothing) {
  KernelEvidence evidence{.median_us = 40};
  evidence.metrics = {{std::string(kDramThroughputPct), 91}, {std::string(kSmThroughputPct), 22}};
  EXPECT_EQ(ClassifyKernel(evidence, H100(0)).bound, Boundedness::kMemory);
  evidence.metrics.clear();
  evidence.bytes_per_launch = 120e6;  // 3000 GB/s
  EXPECT_EQ(ClassifyKernel(evidence, H100(0)).bound, Boundedness::kMemory);
  evidence.bytes_per_launch = 0;
  EXPECT_EQ(ClassifyKernel(evidence, H100(0)).bound, Boundedness::kUnknown);
}

TEST(GpuOfTest, ByIndexElseTheFirst) {
  api::ExperimentResult result;
  *result.mutable_provenance()->add_gpus() = H100(3);
  *result.mutable_provenance()->add_gpus() = H100(5);
  EXPECT_EQ(GpuOf(result, 5).index(), 5);
  EXPECT_EQ(GpuOf(result, 9).index(), 3);
  EXPECT_EQ(GpuOf(api::ExperimentResult(), 0).name(), "");
}

}  // namespace
}  // namespace gpuprof::report
