#include "cupti/tracing_session.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cupti/metric_names.h"
#include "google/protobuf/text_format.h"

namespace gpuprof::cupti {
namespace {

namespace api = ::gpuprof::v1;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;
using MetricList = std::vector<std::pair<std::string, double>>;

api::ActivityRecord Kernel(const std::string& name, uint32_t correlation_id,
                           api::Phase phase = api::PHASE_PROFILING) {
  api::ActivityRecord record;
  record.set_kind(api::ActivityRecord::KIND_KERNEL);
  record.set_name(name);
  record.set_correlation_id(correlation_id);
  record.set_phase(phase);
  return record;
}

TEST(AttachKernelMetricsTest, InLaunchOrderWhenCountsMatch) {
  // Two launches of the same kernel with different metrics, delivered out of order.
  std::vector<api::ActivityRecord> records = {Kernel("copy(float const*, float*)", 12),
                                              Kernel("copy(float const*, float*)", 11),
                                              Kernel("copy(float const*, float*)", 5,
                                                     api::PHASE_TIMED)};
  AttachKernelMetrics({{"0", {{"dram", 90}}}, {"1", {{"dram", 40}}}}, {}, {}, records);
  EXPECT_THAT(records[1].metrics(), UnorderedElementsAre(Pair("dram", 90)));  // correlation 11
  EXPECT_THAT(records[0].metrics(), UnorderedElementsAre(Pair("dram", 40)));
  EXPECT_THAT(records[2].metrics(), IsEmpty()) << "timed launches are not the profiled ones";
}

TEST(AttachKernelMetricsTest, ReplayedRecordsOfOneLaunchShareItsMetrics) {
  std::vector<api::ActivityRecord> records = {Kernel("k()", 7), Kernel("k()", 7),
                                              Kernel("j()", 8)};
  AttachKernelMetrics({{"_Z1kv", {{"sm", 10}}}, {"_Z1jv", {{"sm", 70}}}}, {}, {}, records);
  EXPECT_THAT(records[0].metrics(), UnorderedElementsAre(Pair("sm", 10)));
  EXPECT_THAT(records[1].metrics(), UnorderedElementsAre(Pair("sm", 10)));
  EXPECT_THAT(records[2].metrics(), UnorderedElementsAre(Pair("sm", 70)));
}

TEST(AttachKernelMetricsTest, ByNameWhenCountsDifferAndStallsByFunction) {
  std::vector<api::ActivityRecord> records = {Kernel("k()", 1), Kernel("j()", 2),
                                              Kernel("j()", 3)};
  const std::string stall = cupti::StallMetricName("long_scoreboard");
  AttachKernelMetrics({{"_Z1jv", {{"sm", 70}}}}, {{"_Z1kv", {{stall, 80}}}}, {}, records);
  EXPECT_THAT(records[0].metrics(), UnorderedElementsAre(Pair(stall, 80)));
  EXPECT_THAT(records[1].metrics(), UnorderedElementsAre(Pair("sm", 70)));
  EXPECT_THAT(records[2].metrics(), UnorderedElementsAre(Pair("sm", 70)));
}

TEST(AttachKernelMetricsTest, CountersOnlyOnTheProfilerRunStallsOnEvery) {
  // Range profiler run (correlation 20), then the PC sampling run (21), as at LEVEL_FULL;
  // auto ranges are named by index.
  std::vector<api::ActivityRecord> records = {Kernel("k()", 20), Kernel("k()", 21)};
  const std::string stall = cupti::StallMetricName("long_scoreboard");
  AttachKernelMetrics({{"0", {{"dram", 85}}}}, {{"_Z1kv", {{stall, 98}}}}, {20}, records);
  EXPECT_THAT(records[0].metrics(), UnorderedElementsAre(Pair("dram", 85), Pair(stall, 98)));
  EXPECT_THAT(records[1].metrics(), UnorderedElementsAre(Pair(stall, 98)));
}

TEST(TracingSessionTest, OffCollectsNothingAndEmitsNothing) {
  int events = 0;
  api::TracingOptions options;
  options.set_level(api::TracingOptions::LEVEL_OFF);
  TracingSession session(options, {0}, [&](const api::ExperimentEvent&) { ++events; });
  session.OnPhase(api::PHASE_WARMUP);
  bool launched = false;
  EXPECT_TRUE(session
                  .ProfileKernels([&] {
                    launched = true;
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_FALSE(launched) << "profiling runs only at METRICS and FULL";
  api::ExperimentResult result;
  session.Finish(result);
  EXPECT_EQ(events, 0);
  EXPECT_EQ(result.dropped_activity_records(), 0);
  EXPECT_THAT(result.not_collected(), IsEmpty());
}

TEST(TracingSessionTest, ScaffoldingMarkerIsHarmlessWithoutTracing) {
  api::TracingOptions options;
  options.set_level(api::TracingOptions::LEVEL_OFF);
  TracingSession session(options, {0}, [](const api::ExperimentEvent&) {});
  measure::ScaffoldingMarker* marker = session.scaffolding_marker();
  ASSERT_NE(marker, nullptr);
  marker->End();  // an End without Begin pops nothing
  { const measure::ScopedScaffolding scaffolding(marker); }
  api::ExperimentResult result;
  session.Finish(result);
  marker->Begin();  // after Finish: nothing to tag
  marker->End();
  EXPECT_THAT(result.not_collected(), IsEmpty());
}

}  // namespace
}  // namespace gpuprof::cupti
