#include "common/field_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/workloads.pb.h"

namespace gpuprof {
namespace {

using ::google::protobuf::FieldDescriptor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const FieldDescriptor* Field(const google::protobuf::Message& message, const char* name) {
  const FieldDescriptor* field = message.GetDescriptor()->FindFieldByName(name);
  EXPECT_NE(field, nullptr) << name;
  return field;
}

TEST(EnumShortNameTest, StripsTheCommonPrefix) {
  EXPECT_EQ(EnumShortName(v1::DataType_descriptor()->FindValueByName("DATA_TYPE_FP8_E4M3")),
            "fp8-e4m3");
  EXPECT_EQ(EnumShortName(v1::ExperimentState_descriptor(), v1::TIMED_OUT), "timed-out");
  EXPECT_EQ(EnumShortName(v1::GpuSelection::Placement_descriptor(),
                          v1::GpuSelection::PLACEMENT_SAME_NUMA),
            "same-numa");
  EXPECT_EQ(EnumShortName(v1::DataType_descriptor(), 99), "99");
}

TEST(EnumChoicesTest, ListsNonZeroValuesInOrder) {
  EXPECT_THAT(EnumChoices(v1::DataType_descriptor()),
              ElementsAre("fp32", "fp16", "bf16", "fp8-e4m3", "int8", "int32", "fp8-e5m2"));
  EXPECT_THAT(EnumChoices(v1::MeasurementOptions::L2Mode_descriptor()), ElementsAre("hot", "cold"));
}

TEST(ParseEnumValueTest, AcceptsShortAndFullNamesInAnyCase) {
  const auto* data_type = v1::DataType_descriptor();
  EXPECT_EQ((*ParseEnumValue(data_type, "bf16"))->number(), v1::DATA_TYPE_BF16);
  EXPECT_EQ((*ParseEnumValue(data_type, "BF16"))->number(), v1::DATA_TYPE_BF16);
  EXPECT_EQ((*ParseEnumValue(data_type, "fp8_e4m3"))->number(), v1::DATA_TYPE_FP8_E4M3);
  EXPECT_EQ((*ParseEnumValue(data_type, "DATA_TYPE_INT8"))->number(), v1::DATA_TYPE_INT8);
  EXPECT_EQ((*ParseEnumValue(v1::CollectiveOp_descriptor(), "all-reduce"))->number(),
            v1::COLLECTIVE_OP_ALL_REDUCE);
  EXPECT_EQ((*ParseEnumValue(v1::StoreLaunch_descriptor(), "fused-kv"))->number(),
            v1::STORE_LAUNCH_FUSED_KV);
  EXPECT_EQ((*ParseEnumValue(v1::AttentionPhase_descriptor(), "Prefill"))->number(),
            v1::ATTENTION_PHASE_PREFILL);
}

TEST(ParseEnumValueTest, RejectsUnknownAndUnspecified) {
  auto parsed = ParseEnumValue(v1::DataType_descriptor(), "bf61");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(),
            "\"bf61\" is not one of fp32, fp16, bf16, fp8-e4m3, int8, int32, fp8-e5m2");
  EXPECT_FALSE(ParseEnumValue(v1::DataType_descriptor(), "unspecified").ok());
}

TEST(ParseBoolTest, AcceptsCommonSpellings) {
  EXPECT_TRUE(*ParseBool("True"));
  EXPECT_TRUE(*ParseBool("1"));
  EXPECT_FALSE(*ParseBool("off"));
  EXPECT_FALSE(ParseBool("").ok());
}

TEST(ParseSizedIntegerTest, CountsUseDecimalSuffixes) {
  EXPECT_EQ(*ParseSizedInteger("4096", SizeUnits::kCount), 4096);
  EXPECT_EQ(*ParseSizedInteger("32K", SizeUnits::kCount), 32000);
  EXPECT_EQ(*ParseSizedInteger("32k", SizeUnits::kCount), 32000);
  EXPECT_EQ(*ParseSizedInteger("1.5M", SizeUnits::kCount), 1500000);
  EXPECT_EQ(*ParseSizedInteger("2G", SizeUnits::kCount), 2000000000);
  EXPECT_EQ(*ParseSizedInteger("4Ki", SizeUnits::kCount), 4096);
  EXPECT_EQ(*ParseSizedInteger("-3", SizeUnits::kCount), -3);
  EXPECT_EQ(*ParseSizedInteger("0x10", SizeUnits::kCount), 16);
}

TEST(ParseSizedIntegerTest, BytesUseBinarySuffixes) {
  EXPECT_EQ(*ParseSizedInteger("64K", SizeUnits::kBytes), 65536);
  EXPECT_EQ(*ParseSizedInteger("64KB", SizeUnits::kBytes), 65536);
  EXPECT_EQ(*ParseSizedInteger("16MiB", SizeUnits::kBytes), 16 << 20);
  EXPECT_EQ(*ParseSizedInteger("1g", SizeUnits::kBytes), int64_t{1} << 30);
  EXPECT_EQ(*ParseSizedInteger("512B", SizeUnits::kBytes), 512);
  EXPECT_EQ(*ParseSizedInteger("0.5K", SizeUnits::kBytes), 512);
}

TEST(ParseSizedIntegerTest, RejectsBadSyntax) {
  for (const char* text : {"", "abc", "12x", "1.5", "1.0001K", "K", "4KB", "--1", "1 2"}) {
    EXPECT_FALSE(ParseSizedInteger(text, SizeUnits::kCount).ok()) << text;
  }
  auto parsed = ParseSizedInteger("12x", SizeUnits::kBytes);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("\"12x\" is not a byte count"));
  EXPECT_FALSE(ParseSizedInteger("99999999999999999999", SizeUnits::kCount).ok());
  EXPECT_FALSE(ParseSizedInteger("9000000T", SizeUnits::kBytes).ok());
}

TEST(SetFieldFromTextTest, SetsScalarsOfEveryKind) {
  v1::IndexSpec spec;
  ASSERT_TRUE(SetFieldFromText(&spec, Field(spec, "num_tokens"), "8K").ok());
  ASSERT_TRUE(SetFieldFromText(&spec, Field(spec, "dtype"), "bf16").ok());
  ASSERT_TRUE(SetFieldFromText(&spec, Field(spec, "use_pdl"), "true").ok());
  ASSERT_TRUE(SetFieldFromText(&spec, Field(spec, "seed"), "18446744073709551615").ok());
  ASSERT_TRUE(SetFieldFromText(&spec, Field(spec, "threads"), "256").ok());
  EXPECT_EQ(spec.num_tokens(), 8000);
  EXPECT_EQ(spec.dtype(), v1::DATA_TYPE_BF16);
  EXPECT_TRUE(spec.use_pdl());
  EXPECT_EQ(spec.seed(), UINT64_MAX);
  EXPECT_EQ(spec.threads(), 256);

  v1::RadixSpec radix;
  ASSERT_TRUE(SetFieldFromText(&radix, Field(radix, "history_growth_probability"), "0.25").ok());
  EXPECT_DOUBLE_EQ(radix.history_growth_probability(), 0.25);
  EXPECT_FALSE(SetFieldFromText(&radix, Field(radix, "history_growth_probability"), "nan").ok());
  EXPECT_FALSE(SetFieldFromText(&radix, Field(radix, "history_growth_probability"), "x").ok());
}

TEST(SetFieldFromTextTest, ByteFieldsUseBinarySuffixes) {
  v1::CollectiveSpec spec;
  ASSERT_TRUE(SetFieldFromText(&spec, Field(spec, "bytes_per_rank"), "256M").ok());
  EXPECT_EQ(spec.bytes_per_rank(), 256 << 20);
}

TEST(SetFieldFromTextTest, RangeOfTheFieldTypeIsChecked) {
  v1::IndexSpec spec;
  auto status = SetFieldFromText(&spec, Field(spec, "threads"), "3G");
  EXPECT_EQ(status.message(), "\"3G\" is out of range [-2147483648, 2147483647]");
  status = SetFieldFromText(&spec, Field(spec, "seed"), "-1");
  EXPECT_EQ(status.message(), "\"-1\" must not be negative");
  // Negative sizes are the daemon's to reject, with its own message.
  EXPECT_TRUE(SetFieldFromText(&spec, Field(spec, "num_tokens"), "-1").ok());
  EXPECT_EQ(spec.num_tokens(), -1);
}

TEST(SetFieldFromTextTest, BoolRejectsOtherWords) {
  v1::IndexSpec spec;
  EXPECT_EQ(SetFieldFromText(&spec, Field(spec, "use_pdl"), "maybe").message(),
            "\"maybe\" is not a boolean (true or false)");
}

TEST(SetFieldFromTextTest, SmallMessagesAreColonSeparated) {
  v1::IndexSpec spec;
  ASSERT_TRUE(SetFieldFromText(&spec, Field(spec, "vocab_range"), "0:32K").ok());
  EXPECT_EQ(spec.vocab_range().start(), 0);
  EXPECT_EQ(spec.vocab_range().end(), 32000);
  EXPECT_EQ(SetFieldFromText(&spec, Field(spec, "vocab_range"), "5").message(),
            "\"5\" is not START:END");
  EXPECT_THAT(SetFieldFromText(&spec, Field(spec, "vocab_range"), "0:x").message(),
              HasSubstr("END: \"x\" is not an integer"));
}

TEST(SetFieldFromTextTest, Durations) {
  v1::ExperimentRequest request;
  ASSERT_TRUE(SetFieldFromText(&request, Field(request, "timeout"), "1m30.5s").ok());
  EXPECT_EQ(request.timeout().seconds(), 90);
  EXPECT_EQ(request.timeout().nanos(), 500000000);
  ASSERT_TRUE(SetFieldFromText(&request, Field(request, "timeout"), "-1.5s").ok());
  EXPECT_EQ(request.timeout().seconds(), -1);
  EXPECT_EQ(request.timeout().nanos(), -500000000);
  EXPECT_EQ(SetFieldFromText(&request, Field(request, "timeout"), "90").message(),
            "\"90\" is not a duration (e.g. 500ms, 90s, 10m, 1h30m)");
  EXPECT_FALSE(SetFieldFromText(&request, Field(request, "timeout"), "inf").ok());
}

TEST(SetFieldFromTextTest, RepeatedFieldsTakeCommaListsAndAppend) {
  v1::GpuSelection selection;
  ASSERT_TRUE(SetFieldFromText(&selection, Field(selection, "gpu_ids"), "0, 1").ok());
  ASSERT_TRUE(SetFieldFromText(&selection, Field(selection, "gpu_ids"), "3").ok());
  EXPECT_THAT(selection.gpu_ids(), ElementsAre(0, 1, 3));
  EXPECT_FALSE(SetFieldFromText(&selection, Field(selection, "gpu_ids"), "0,,1").ok());
}

TEST(SetFieldFromTextTest, MapsTakeKeyEqualsValue) {
  v1::ExperimentRequest request;
  ASSERT_TRUE(SetFieldFromText(&request, Field(request, "labels"), "team=serving").ok());
  ASSERT_TRUE(SetFieldFromText(&request, Field(request, "labels"), "note=a=b").ok());
  EXPECT_EQ(request.labels().at("team"), "serving");
  EXPECT_EQ(request.labels().at("note"), "a=b");
  EXPECT_EQ(SetFieldFromText(&request, Field(request, "labels"), "oops").message(),
            "\"oops\" is not KEY=VALUE");
}

TEST(SetFieldFromTextTest, UnsupportedFieldsSaySo) {
  v1::ExperimentRequest request;
  EXPECT_FALSE(IsSettableFromText(Field(request, "measurement")));
  EXPECT_EQ(SetFieldFromText(&request, Field(request, "measurement"), "x").code(),
            absl::StatusCode::kUnimplemented);
}

TEST(FieldValueSyntaxTest, DescribesEachKind) {
  v1::ExperimentRequest request;
  v1::IndexSpec spec;
  v1::CollectiveSpec collective;
  EXPECT_EQ(FieldValueSyntax(Field(spec, "num_tokens")), "INT");
  EXPECT_EQ(FieldValueSyntax(Field(collective, "bytes_per_rank")), "BYTES");
  EXPECT_EQ(FieldValueSyntax(Field(spec, "dtype")), "fp32|fp16|bf16|fp8-e4m3|int8|int32|fp8-e5m2");
  EXPECT_EQ(FieldValueSyntax(Field(spec, "vocab_range")), "START:END");
  EXPECT_EQ(FieldValueSyntax(Field(request, "timeout")), "DURATION");
  EXPECT_EQ(FieldValueSyntax(Field(request, "labels")), "KEY=VALUE");
  EXPECT_EQ(FieldValueSyntax(Field(request.gpus(), "gpu_ids")), "INT[,INT...]");
}

TEST(FieldTypeNameTest, NamesProtoTypes) {
  v1::ExperimentRequest request;
  v1::IndexSpec spec;
  EXPECT_EQ(FieldTypeName(Field(spec, "num_tokens")), "int64");
  EXPECT_EQ(FieldTypeName(Field(spec, "dtype")), "DataType");
  EXPECT_EQ(FieldTypeName(Field(spec, "vocab_range")), "VocabRange");
  EXPECT_EQ(FieldTypeName(Field(request.gpus(), "gpu_ids")), "repeated int32");
  EXPECT_EQ(FieldTypeName(Field(request, "labels")), "map<string, string>");
}

}  // namespace
}  // namespace gpuprof
