#include "cupti/pc_sampling.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprof::cupti {
namespace {

using ::testing::Pair;
using ::testing::ElementsAre;
using ::testing::DoubleEq;

TEST(ShortStallReasonNameTest, StripsTheCounterPrefix) {
  EXPECT_EQ(ShortStallReasonName("smsp__pcsamp_warps_issue_stalled_long_scoreboard"),
            "long_scoreboard");
  EXPECT_EQ(ShortStallReasonName("other_name"), "other_name");
  EXPECT_TRUE(IsNotIssuedVariant("smsp__pcsamp_warps_issue_stalled_barrier_not_issued"));
  EXPECT_FALSE(IsNotIssuedVariant("smsp__pcsamp_warps_issue_stalled_barrier"));
}

TEST(SummarizeStallsTest, PercentOfSamplesLargestFirstWithoutNotIssued) {
  const StallBreakdown breakdown = SummarizeStalls(
      "_Z4copyPKfPf", {{"smsp__pcsamp_warps_issue_stalled_long_scoreboard", 600},
                       {"smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued", 550},
                       {"smsp__pcsamp_warps_issue_stalled_selected", 100},
                       {"smsp__pcsamp_warps_issue_stalled_barrier", 300},
                       {"smsp__pcsamp_warps_issue_stalled_sleeping", 0}});
  EXPECT_EQ(breakdown.function_name, "_Z4copyPKfPf");
  EXPECT_EQ(breakdown.samples, 1000u);
  EXPECT_THAT(breakdown.percent_by_reason,
              ElementsAre(Pair("long_scoreboard", DoubleEq(60)), Pair("barrier", DoubleEq(30)),
                          Pair("selected", DoubleEq(10))));
  double total = 0;
  for (const auto& [reason, percent] : breakdown.percent_by_reason) total += percent;
  EXPECT_DOUBLE_EQ(total, 100);
}

TEST(SummarizeStallsTest, NoSamples) {
  const StallBreakdown breakdown = SummarizeStalls("k", {});
  EXPECT_EQ(breakdown.samples, 0u);
  EXPECT_TRUE(breakdown.percent_by_reason.empty());
}

}  // namespace
}  // namespace gpuprof::cupti
