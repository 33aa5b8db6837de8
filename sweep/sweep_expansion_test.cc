#include "sweep/sweep_expansion.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "google/protobuf/text_format.h"

namespace gpuprof::sweep {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

v1::SweepRequest Parse(const std::string& text) {
  v1::SweepRequest request;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &request)) << text;
  return request;
}

std::vector<std::string> Describe(const std::vector<ExpandedPoint>& points) {
  std::vector<std::string> described;
  for (const auto& point : points) described.push_back(DescribeParameters(point.parameters));
  return described;
}

TEST(ExpandSweep, CartesianProductVariesTheLastAxisFastest) {
  auto points = ExpandSweep(Parse(R"pb(
    base { index { vocab_size: 128000 } gpus { gpu_count: 1 } }
    axes { field: "num_tokens" values: "1" values: "4Ki" }
    axes { field: "hidden_dim" values: "4096" values: "8192" }
    axes { field: "dtype" values: "bf16" values: "FP16" }
  )pb"));
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 8u);
  EXPECT_THAT(Describe(*points)[0], "num_tokens=1, hidden_dim=4096, dtype=bf16");
  EXPECT_THAT(Describe(*points)[1], "num_tokens=1, hidden_dim=4096, dtype=fp16");
  EXPECT_THAT(Describe(*points)[7], "num_tokens=4096, hidden_dim=8192, dtype=fp16");
  const v1::ExperimentRequest& last = (*points)[7].request;
  EXPECT_EQ(last.index().num_tokens(), 4096);
  EXPECT_EQ(last.index().hidden_dim(), 8192);
  EXPECT_EQ(last.index().dtype(), v1::DATA_TYPE_FP16);
  // The base's own fields stay.
  EXPECT_EQ(last.index().vocab_size(), 128000);
  EXPECT_EQ(last.gpus().gpu_count(), 1);
}

TEST(ExpandSweep, TheKernelAxisGivesEachPointItsSourceAndNamesItByFile) {
  auto points = ExpandSweep(Parse(R"pb(
    base { index {} custom_kernel { block_threads: 128 mode: MODE_TEST } }
    axes { field: "kernel" values: "ours" values: "a.cu" values: "b.cu"
           kernels {} kernels { source: "A" file_name: "a.cu" kernel_name: "ka" }
           kernels { source: "B" file_name: "b.cu" kernel_name: "kb" } }
    axes { field: "num_tokens" values: "1" values: "64" }
  )pb"));
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 6u);
  EXPECT_EQ(Describe(*points)[0], "kernel=ours, num_tokens=1");
  EXPECT_EQ(Describe(*points)[3], "kernel=a.cu, num_tokens=64");
  EXPECT_FALSE((*points)[0].request.has_custom_kernel());
  const v1::CustomKernel& b = (*points)[5].request.custom_kernel();
  EXPECT_EQ(b.source(), "B");
  EXPECT_EQ(b.kernel_name(), "kb");
  EXPECT_EQ(b.block_threads(), 128);  // the base's launch shape and mode stay
  EXPECT_EQ(b.mode(), v1::CustomKernel::MODE_TEST);
  EXPECT_EQ((*points)[5].request.index().num_tokens(), 64);
  EXPECT_EQ(KernelAxisValue((*points)[5].request), "b.cu");

  EXPECT_THAT(ExpandSweep(Parse(R"pb(base { index {} }
                                     axes { field: "kernel" values: "a.cu" })pb"))
                  .status()
                  .message(),
              HasSubstr("needs a kernel for each value"));
  EXPECT_THAT(ExpandSweep(Parse(R"pb(base { index {} }
                                     axes { field: "num_tokens" values: "1" kernels {} })pb"))
                  .status()
                  .message(),
              HasSubstr("kernels belong to the \"kernel\" axis only"));
}

TEST(ExpandSweep, ZippedAxesPairValuesAndNeedEqualLengths) {
  auto points = ExpandSweep(Parse(R"pb(
    base { store {} }
    combination: ZIPPED
    axes { field: "num_kv_heads" values: "8" values: "32" }
    axes { field: "head_dim" values: "128" values: "64" }
  )pb"));
  ASSERT_TRUE(points.ok()) << points.status();
  EXPECT_THAT(Describe(*points),
              ElementsAre("num_kv_heads=8, head_dim=128", "num_kv_heads=32, head_dim=64"));

  auto uneven = ExpandSweep(Parse(R"pb(
    base { store {} }
    combination: ZIPPED
    axes { field: "num_kv_heads" values: "8" values: "32" }
    axes { field: "head_dim" values: "128" }
  )pb"));
  EXPECT_EQ(uneven.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(uneven.status().message(), HasSubstr("\"head_dim\" has 1"));
}

TEST(ExpandSweep, RangesAndPowersOfTwo) {
  auto points = ExpandSweep(Parse(R"pb(
    base { index {} }
    axes { field: "num_tokens" powers_of_two { min: 3 max: 64 } }
    axes { field: "hidden_dim" range { start: 1024 end: 3500 step: 1024 } }
  )pb"));
  ASSERT_TRUE(points.ok()) << points.status();
  std::vector<int64_t> tokens;
  for (size_t i = 0; i < points->size(); i += 3) tokens.push_back((*points)[i].request.index().num_tokens());
  EXPECT_THAT(tokens, ElementsAre(4, 8, 16, 32, 64));
  EXPECT_THAT((*points)[2].parameters, ElementsAre(Pair("num_tokens", "4"), Pair("hidden_dim", "3072")));
}

TEST(ExpandSweep, CommonOptionsByTheirPathAndQualifiedSpecFields) {
  auto points = ExpandSweep(Parse(R"pb(
    base { index {} }
    axes { field: "measurement.l2_mode" values: "hot" values: "cold" }
    axes { field: "index.num_tokens" values: "64" }
    axes { field: "timeout" values: "90s" }
  )pb"));
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 2u);
  EXPECT_EQ((*points)[1].request.measurement().l2_mode(), v1::MeasurementOptions::L2_MODE_COLD);
  EXPECT_EQ((*points)[1].request.timeout().seconds(), 90);
  EXPECT_THAT(Describe(*points)[1], "measurement.l2_mode=cold, index.num_tokens=64, timeout=1m30s");
}

TEST(ExpandSweep, ErrorsNameTheAxisAndTheValue) {
  const auto error = [](const std::string& text) {
    return std::string(ExpandSweep(Parse(text)).status().message());
  };
  EXPECT_THAT(error(R"pb(base { index {} } axes { field: "num_tokens" values: "64" values: "lots" })pb"),
              HasSubstr("axis \"num_tokens\": value \"lots\": \"lots\" is not an integer"));
  EXPECT_THAT(error(R"pb(base { index {} } axes { field: "dtype" values: "bf61" })pb"),
              HasSubstr("axis \"dtype\": value \"bf61\""));
  EXPECT_THAT(error(R"pb(base { index {} } axes { field: "heads" values: "1" })pb"),
              HasSubstr("axis \"heads\": no such field; use a field of IndexSpec"));
  EXPECT_THAT(error(R"pb(base { index {} } axes { field: "store.num_tokens" values: "1" })pb"),
              HasSubstr("the sweep's workload is index"));
  EXPECT_THAT(error(R"pb(base { index {} } axes { field: "dtype" range { start: 1 end: 2 } })pb"),
              HasSubstr("axis \"dtype\": ranges and powers of two need an integer field"));
  EXPECT_THAT(error(R"pb(base { index {} } axes { field: "num_tokens" range { start: 9 end: 2 } })pb"),
              HasSubstr("range end 2 is below its start 9"));
  EXPECT_THAT(error(R"pb(base { index {} } axes { field: "num_tokens" })pb"),
              HasSubstr("axis \"num_tokens\": no values"));
  EXPECT_THAT(error(R"pb(base { index {} }
                         axes { field: "num_tokens" values: "1" }
                         axes { field: "index.num_tokens" values: "2" })pb"),
              HasSubstr("the same field is swept by two axes"));
  EXPECT_THAT(error(R"pb(axes { field: "num_tokens" values: "1" })pb"),
              HasSubstr("base: no workload set"));
  EXPECT_THAT(error(R"pb(base { index {} }
                         axes { field: "num_tokens" range { start: 1 end: 200 } }
                         axes { field: "hidden_dim" range { start: 1 end: 200 } })pb"),
              HasSubstr("more than 10000 points"));
}

TEST(ExpandSweep, NoAxesIsOnePoint) {
  auto points = ExpandSweep(Parse(R"pb(base { radix { num_requests: 300 } })pb"));
  ASSERT_TRUE(points.ok());
  ASSERT_EQ(points->size(), 1u);
  EXPECT_EQ(DescribeParameters((*points)[0].parameters), "(base)");
}

TEST(FieldValueText, CanonicalTextForMatching) {
  v1::ExperimentRequest request;
  request.mutable_index()->set_num_tokens(4096);
  request.mutable_index()->set_dtype(v1::DATA_TYPE_BF16);
  (*request.mutable_labels())["b"] = "2";
  (*request.mutable_labels())["a"] = "1";
  EXPECT_EQ(FieldValueText(request, *ResolveAxisField(request, "num_tokens")), "4096");
  EXPECT_EQ(FieldValueText(request, *ResolveAxisField(request, "dtype")), "bf16");
  EXPECT_EQ(FieldValueText(request, *ResolveAxisField(request, "labels")), "a=1,b=2");
}

}  // namespace
}  // namespace gpuprof::sweep
