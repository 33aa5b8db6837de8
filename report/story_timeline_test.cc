#include "report/story_timeline.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"

namespace gpuprof::report {
namespace {

namespace api = ::gpuprof::v1;
using ::testing::ElementsAre;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

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

TEST(BuildStoryTimelineTest, GroupsByPhaseKindNameGpuAndScaffolding) {
  const std::vector<api::ActivityRecord> records = {
      Record("kind: KIND_PHASE phase: PHASE_TIMED name: 'timed' start_ns: 1000 end_ns: 90000"),
      Record(Kernel("Blocker", 1000, 500, "scaffolding: true")),
      Record(Kernel("Main", 2000, 4000)),
      Record(Kernel("Merge", 6000, 1000)),
      Record(Kernel("Main", 8000, 6000)),
      Record(Kernel("Main", 8000, 5000, "gpu_id: 1")),
      // Named like the blocker but not flagged: a kernel of its own.
      Record(Kernel("Blocker", 20000, 100)),
      Record("kind: KIND_MEMSET name: 'memset' bytes: 1024 start_ns: 30000 end_ns: 30100 "
             "phase: PHASE_TIMED scaffolding: true"),
      Record("kind: KIND_OVERHEAD name: 'CUPTI buffer flush' gpu_id: -1 start_ns: 40000 "
             "end_ns: 41000"),
  };
  const StoryTimeline timeline = BuildStoryTimeline(records);
  EXPECT_FALSE(timeline.empty);
  EXPECT_EQ(timeline.origin_ns, 1000);
  EXPECT_THAT(timeline.gpu_ids, ElementsAre(0, 1));
  EXPECT_TRUE(timeline.multi_gpu());
  EXPECT_EQ(timeline.overhead_records, 1);
  EXPECT_EQ(timeline.overhead_ns, 1000);
  ASSERT_EQ(timeline.phases.size(), 1u);
  const PhaseNode& timed = timeline.phases[0];
  EXPECT_TRUE(timed.has_marker);
  ASSERT_EQ(timed.groups.size(), 6u);

  const RecordGroup& blocker = timed.groups[0];
  EXPECT_EQ(blocker.name, "Blocker");
  EXPECT_TRUE(blocker.scaffolding);
  const RecordGroup& main = timed.groups[1];
  EXPECT_EQ(main.name, "Main");
  EXPECT_EQ(main.gpu_id, 0);
  EXPECT_EQ(main.count, 2);
  EXPECT_EQ(main.total_ns, 10000);
  EXPECT_DOUBLE_EQ(main.median_ns(), 5000);
  EXPECT_EQ(main.first, &records[2]);
  EXPECT_EQ(timed.groups[2].name, "Merge");
  EXPECT_EQ(timed.groups[3].name, "Main");
  EXPECT_EQ(timed.groups[3].gpu_id, 1);
  EXPECT_EQ(timed.groups[4].name, "Blocker");
  EXPECT_FALSE(timed.groups[4].scaffolding);
  EXPECT_TRUE(timed.groups[5].scaffolding);
  EXPECT_EQ(timed.groups[5].total_bytes, 1024);

  EXPECT_THAT(timed.GpuIds(), ElementsAre(0, 1));
  EXPECT_EQ(timed.GpuBusyNs(1), 5000);
  EXPECT_EQ(timed.GpuBusyNs(), 500 + 10000 + 1000 + 5000 + 100 + 100);
}

TEST(BuildStoryTimelineTest, PhasesWithoutMarkersAreMadeFromTheirRecordsInTimeOrder) {
  const std::vector<api::ActivityRecord> records = {
      Record("kind: KIND_KERNEL name: 'late' start_ns: 50000 end_ns: 51000 "
             "phase: PHASE_VERIFICATION"),
      Record("kind: KIND_KERNEL name: 'k' start_ns: 1000 end_ns: 6000 phase: PHASE_WARMUP"),
      Record("kind: KIND_KERNEL name: 'k' start_ns: 7000 end_ns: 9000 phase: PHASE_WARMUP"),
  };
  const StoryTimeline timeline = BuildStoryTimeline(records);
  ASSERT_EQ(timeline.phases.size(), 2u);
  EXPECT_EQ(timeline.phases[0].phase, api::PHASE_WARMUP);
  EXPECT_FALSE(timeline.phases[0].has_marker);
  EXPECT_EQ(timeline.phases[0].start_ns, 1000);
  EXPECT_EQ(timeline.phases[0].end_ns, 9000);
  EXPECT_EQ(timeline.phases[1].phase, api::PHASE_VERIFICATION);
  EXPECT_FALSE(timeline.multi_gpu());
}

TEST(BuildStoryTimelineTest, MetricsByKernelFromTheProfilingReplay) {
  const std::vector<api::ActivityRecord> records = {
      Record(Kernel("k", 1000, 10)),
      Record("kind: KIND_KERNEL name: 'k' phase: PHASE_PROFILING "
             "metrics { key: 'dram' value: 90 }"),
  };
  const StoryTimeline timeline = BuildStoryTimeline(records);
  ASSERT_TRUE(timeline.metrics_by_kernel.contains("k"));
  EXPECT_THAT(timeline.metrics_by_kernel.at("k"), UnorderedElementsAre(Pair("dram", 90)));
  // The replayed launch has no timestamps: counted, not timed.
  const RecordGroup& replayed = timeline.phases.front().phase == api::PHASE_PROFILING
                                    ? timeline.phases.front().groups[0]
                                    : timeline.phases.back().groups[0];
  EXPECT_EQ(replayed.count, 1);
  EXPECT_TRUE(replayed.durations_ns.empty());
}

// Launch calls are the host's side, drawn by the trace: the story's groups stay GPU work.
TEST(BuildStoryTimelineTest, LaunchCallsAreNotGrouped) {
  const std::vector<api::ActivityRecord> records = {
      Record("kind: KIND_LAUNCH name: 'cudaLaunchKernel' start_ns: 900 end_ns: 950 "
             "phase: PHASE_TIMED correlation_id: 7 thread_id: 3 gpu_id: -1"),
      Record(Kernel("k", 1000, 10, "correlation_id: 7")),
  };
  const StoryTimeline timeline = BuildStoryTimeline(records);
  ASSERT_EQ(timeline.phases.size(), 1u);
  ASSERT_EQ(timeline.phases[0].groups.size(), 1u);
  EXPECT_EQ(timeline.phases[0].groups[0].name, "k");
  EXPECT_THAT(timeline.gpu_ids, ElementsAre(0));
}

TEST(BuildStoryTimelineTest, NoRecords) {
  const StoryTimeline timeline = BuildStoryTimeline({});
  EXPECT_TRUE(timeline.empty);
  EXPECT_TRUE(timeline.phases.empty());
  EXPECT_EQ(timeline.origin_ns, 0);
}

}  // namespace
}  // namespace gpuprof::report
