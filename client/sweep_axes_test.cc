#include "client/sweep_axes.h"

#include "gmock/gmock.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/workloads.pb.h"
#include "gtest/gtest.h"

namespace gpuprof::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const google::protobuf::FieldDescriptor* Field(const google::protobuf::Descriptor* message,
                                               const char* name) {
  return message->FindFieldByName(name);
}

TEST(AxisFromFlagTest, ListsOfAnySingleValuedField) {
  auto axis = AxisFromFlag(Field(v1::IndexSpec::descriptor(), "num_tokens"), "1,64, 4Ki");
  ASSERT_TRUE(axis.ok()) << axis.status();
  ASSERT_TRUE(axis->has_value());
  EXPECT_THAT((*axis)->values(), ElementsAre("1", "64", "4Ki"));
  axis = AxisFromFlag(Field(v1::IndexSpec::descriptor(), "dtype"), "bf16,fp16");
  ASSERT_TRUE(axis.ok() && axis->has_value());
  EXPECT_THAT((*axis)->values(), ElementsAre("bf16", "fp16"));
  // A switch, as the parser normalised it.
  axis = AxisFromFlag(Field(v1::AttentionSpec::descriptor(), "causal"), "true,false");
  ASSERT_TRUE(axis.ok() && axis->has_value());
  EXPECT_THAT((*axis)->values(), ElementsAre("true", "false"));
}

TEST(AxisFromFlagTest, OneValueOrARepeatedFieldIsNoAxis) {
  auto axis = AxisFromFlag(Field(v1::IndexSpec::descriptor(), "num_tokens"), "4096");
  ASSERT_TRUE(axis.ok());
  EXPECT_FALSE(axis->has_value());
  axis = AxisFromFlag(Field(v1::AttentionSpec::descriptor(), "q_lens"), "100,257,512");
  ASSERT_TRUE(axis.ok());
  EXPECT_FALSE(axis->has_value());
}

TEST(AxisFromFlagTest, RangesAndPowersOfTwoOfIntegers) {
  auto axis = AxisFromFlag(Field(v1::IndexSpec::descriptor(), "hidden_dim"), "1024:8192:1024");
  ASSERT_TRUE(axis.ok() && axis->has_value());
  EXPECT_EQ((*axis)->range().start(), 1024);
  EXPECT_EQ((*axis)->range().end(), 8192);
  EXPECT_EQ((*axis)->range().step(), 1024);
  axis = AxisFromFlag(Field(v1::IndexSpec::descriptor(), "num_tokens"), "pow2:1:64Ki");
  ASSERT_TRUE(axis.ok() && axis->has_value());
  EXPECT_EQ((*axis)->powers_of_two().min(), 1);
  EXPECT_EQ((*axis)->powers_of_two().max(), 65536);

  EXPECT_THAT(
      AxisFromFlag(Field(v1::IndexSpec::descriptor(), "dtype"), "pow2:1:4").status().message(),
      HasSubstr("powers of two need an integer field"));
  EXPECT_THAT(
      AxisFromFlag(Field(v1::IndexSpec::descriptor(), "num_tokens"), "1:2:3:4").status().message(),
      HasSubstr("write a range as START:END or START:END:STEP"));
}

}  // namespace
}  // namespace gpuprof::client
