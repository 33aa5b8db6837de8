#include "common/fault_label.h"

#include "gtest/gtest.h"

namespace gpuprof {
namespace {

TEST(FaultLabelTest, EveryRankOrOne) {
  const auto crash = ParseFaultLabel("crash");
  ASSERT_TRUE(crash.has_value());
  EXPECT_EQ(crash->fault, "crash");
  EXPECT_TRUE(crash->AppliesTo(0));
  EXPECT_TRUE(crash->AppliesTo(3));
  const auto hang = ParseFaultLabel("hang@1");
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->fault, "hang");
  EXPECT_FALSE(hang->AppliesTo(0));
  EXPECT_TRUE(hang->AppliesTo(1));
}

TEST(FaultLabelTest, RefusesWhatIsNotAFault) {
  EXPECT_FALSE(ParseFaultLabel("explode").has_value());
  EXPECT_FALSE(ParseFaultLabel("hang@").has_value());
  EXPECT_FALSE(ParseFaultLabel("hang@-1").has_value());
  EXPECT_FALSE(ParseFaultLabel("hang@x").has_value());
  EXPECT_FALSE(ParseFaultLabel("").has_value());
}

}  // namespace
}  // namespace gpuprof
