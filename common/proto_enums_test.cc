// The proto-based helpers of common/: enum short names, data types, experiment states.
#include "common/data_types.h"
#include "common/enum_names.h"
#include "common/experiment_states.h"
#include "gtest/gtest.h"

namespace gpuprof {
namespace {

TEST(EnumNamesTest, StripTheSharedPrefixFromTheDescriptor) {
  EXPECT_EQ(EnumShortName(v1::DATA_TYPE_FP8_E4M3), "fp8-e4m3");
  EXPECT_EQ(EnumShortName(v1::SLOT_PATTERN_RANDOM), "random");
  EXPECT_EQ(EnumShortName(v1::TIMED_OUT), "timed-out");
  EXPECT_EQ(EnumShortName(v1::Workload_descriptor(), 999), "999");
  EXPECT_EQ(EnumCommonPrefix(v1::StoreLaunch_descriptor()), "STORE_LAUNCH_");
}

TEST(EnumNamesTest, ParseAcceptsShortAndFullNames) {
  EXPECT_EQ((*ParseEnumValue(v1::DataType_descriptor(), "fp8_e4m3"))->number(),
            v1::DATA_TYPE_FP8_E4M3);
  EXPECT_EQ((*ParseEnumValue(v1::DataType_descriptor(), "DATA_TYPE_BF16"))->number(),
            v1::DATA_TYPE_BF16);
  const auto bad = ParseEnumValue(v1::DataType_descriptor(), "bf61");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not one of fp32, fp16, bf16"), std::string::npos);
  EXPECT_FALSE(ParseEnumValue(v1::DataType_descriptor(), "unspecified").ok());
}

TEST(DataTypesTest, BytesAndNames) {
  EXPECT_EQ(DataTypeBytes(v1::DATA_TYPE_FP32), 4);
  EXPECT_EQ(DataTypeBytes(v1::DATA_TYPE_BF16), 2);
  EXPECT_EQ(DataTypeBytes(v1::DATA_TYPE_FP8_E4M3), 1);
  EXPECT_EQ(DataTypeBytes(v1::DATA_TYPE_UNSPECIFIED), 0);
  EXPECT_EQ(DataTypeName(v1::DATA_TYPE_BF16), "bf16");
  EXPECT_EQ(DataTypeName(v1::DATA_TYPE_UNSPECIFIED), "unspecified");
}

TEST(ExperimentStatesTest, TerminalStates) {
  for (auto state : {v1::FINISHED, v1::FAILED, v1::CANCELLED, v1::TIMED_OUT, v1::INTERRUPTED}) {
    EXPECT_TRUE(IsTerminalState(state)) << state;
  }
  for (auto state : {v1::EXPERIMENT_STATE_UNSPECIFIED, v1::QUEUED, v1::RUNNING}) {
    EXPECT_FALSE(IsTerminalState(state)) << state;
  }
}

}  // namespace
}  // namespace gpuprof
