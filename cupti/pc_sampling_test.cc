#include "cupti/pc_sampling.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprof::cupti {
namespace {

using ::testing::AllOf;
using ::testing::DoubleEq;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;

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

TEST(SummarizePcStallsTest, EachInstructionsSamplesAndTopReasonInOffsetOrder) {
  const std::vector<StallBreakdown::PcSamples> pcs = SummarizePcStalls({
      {0x80,
       {{"smsp__pcsamp_warps_issue_stalled_long_scoreboard", 30},
        {"smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued", 99},
        {"smsp__pcsamp_warps_issue_stalled_selected", 5}}},
      {0x10,
       {{"smsp__pcsamp_warps_issue_stalled_wait", 2},
        {"smsp__pcsamp_warps_issue_stalled_barrier", 2}}},
      // Only "not issued" samples: the instruction is not counted.
      {0x20, {{"smsp__pcsamp_warps_issue_stalled_wait_not_issued", 4}}},
  });
  ASSERT_EQ(pcs.size(), 2u);
  EXPECT_EQ(pcs[0].pc_offset, 0x10u);
  EXPECT_EQ(pcs[0].samples, 4u);
  EXPECT_EQ(pcs[0].top_reason, "barrier");  // a tie goes to the first name
  EXPECT_EQ(pcs[1].pc_offset, 0x80u);
  EXPECT_EQ(pcs[1].samples, 35u);
  EXPECT_EQ(pcs[1].top_reason, "long_scoreboard");
}

TEST(SummarizeStallsTest, NoSamples) {
  const StallBreakdown breakdown = SummarizeStalls("k", {});
  EXPECT_EQ(breakdown.samples, 0u);
  EXPECT_TRUE(breakdown.percent_by_reason.empty());
}

TEST(UnattributedSamplesMessageTest, SaysCuptiKnewNoModuleOnlyWhenEverySampleIsOutside) {
  const std::string outside = UnattributedSamplesMessage(24232, 0, 24232, false);
  EXPECT_THAT(outside, HasSubstr("(24232 samples in all, 0 dropped, 24232 outside user kernels)"));
  EXPECT_THAT(outside, HasSubstr("knew none of the sampled kernels' modules"));
  EXPECT_THAT(UnattributedSamplesMessage(100, 40, 60, false),
              HasSubstr("knew none of the sampled kernels' modules"));
  // Nothing sampled, or everything dropped, is not a module CUPTI missed.
  EXPECT_THAT(UnattributedSamplesMessage(0, 0, 0, false),
              Not(HasSubstr("knew none of the sampled kernels' modules")));
  EXPECT_THAT(UnattributedSamplesMessage(50, 50, 0, true),
              AllOf(HasSubstr("hardware buffer full"),
                    Not(HasSubstr("knew none of the sampled kernels' modules"))));
}

}  // namespace
}  // namespace gpuprof::cupti
