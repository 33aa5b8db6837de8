#include "client/board.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace gpuprof::client {
namespace {

using ::testing::HasSubstr;

v1::Experiment Experiment(const std::string& id, double gbps, const std::string& extra,
                   int64_t hidden = 7168) {
  v1::Experiment experiment;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      absl::StrCat("id: '", id, "' user: 'ana' state: FINISHED created { seconds: 100 } ",
                   "request { index { hidden_dim: ", hidden, " num_tokens: 16384 } } ",
                   "result { measurement { bandwidth_gbps: ", gbps,
                   " kernel_time { samples: 100 median_us: 10 relative_noise: 0.004 } } ",
                   "verification { checked: true passed: true } }"),
      &experiment));
  google::protobuf::TextFormat::MergeFromString(extra, &experiment);
  return experiment;
}

std::vector<const google::protobuf::FieldDescriptor*> Fields(
    std::initializer_list<const char*> names) {
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  for (const char* name : names) fields.push_back(v1::IndexSpec::descriptor()->FindFieldByName(name));
  return fields;
}

v1::ExperimentRequest Shape(int64_t hidden) {
  v1::ExperimentRequest shape;
  shape.mutable_index()->set_hidden_dim(hidden);
  return shape;
}

constexpr char kMine[] = R"pb(request { custom_kernel { file_name: "g.cu" kernel_name: "g" } }
  result { custom_kernel { source_sha256: "abcdef0123456789" kernel_name: "g"
                           checks { checked: true passed: true } } })pb";

TEST(RankBoard, FastestFirstOnlyVerifiedRunsOfTheShape) {
  const std::vector<v1::Experiment> runs = {
      Experiment("exp-1", 2000, ""),
      Experiment("exp-2", 2500, kMine),
      Experiment("exp-3", 3000, "state: FAILED"),
      Experiment("exp-4", 3100, "result { verification { passed: false } }"),
      Experiment("exp-5", 9000, "", /*hidden=*/4096),
      Experiment("exp-6", 2400, kMine),
      Experiment("exp-7", 2600, R"pb(request { custom_kernel { file_name: "w.cu" } }
          result { custom_kernel { source_sha256: "ffff" checks { passed: true } checks { passed: false } } })pb"),
  };
  const std::vector<BoardRow> rows = RankBoard(runs, Shape(7168), Fields({"hidden_dim"}), false);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].experiment.id(), "exp-2");
  EXPECT_EQ(rows[0].kernel, "g@abcdef012345 (g.cu)");
  EXPECT_EQ(rows[1].experiment.id(), "exp-6");
  EXPECT_EQ(rows[2].experiment.id(), "exp-1");
  EXPECT_EQ(rows[2].kernel, "ours");
  EXPECT_DOUBLE_EQ(rows[2].ratio_to_best, 0.8);
  const std::vector<BoardRow> best = RankBoard(runs, Shape(7168), Fields({"hidden_dim"}), true);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[1].experiment.id(), "exp-1");
  EXPECT_EQ(best[1].rank, 2);
  // No field given: every shape.
  EXPECT_EQ(RankBoard(runs, Shape(0), {}, false).size(), 4u);
}

TEST(MatchesShape, OnlyTheFieldsGivenAndDefaultsCount) {
  const v1::Experiment run = Experiment("exp-1", 2000, "");
  EXPECT_TRUE(MatchesShape(run, Shape(7168), Fields({"hidden_dim"})));
  EXPECT_FALSE(MatchesShape(run, Shape(4096), Fields({"hidden_dim"})));
  v1::ExperimentRequest tokens = Shape(0);
  tokens.mutable_index()->set_num_tokens(16384);
  EXPECT_TRUE(MatchesShape(run, tokens, Fields({"num_tokens"})));
  v1::ExperimentRequest store;
  store.mutable_store();
  EXPECT_FALSE(MatchesShape(run, store, {}));
}

TEST(RenderBoard, OneRowPerRunWithItsHeadlineAndNoise) {
  std::vector<BoardRow> rows =
      RankBoard({Experiment("exp-1", 2000, ""), Experiment("exp-2", 2500, kMine)}, Shape(7168), {}, false);
  rows[0].gpu = "NVIDIA H100";
  const std::string table = RenderBoard(rows, absl::UTCTimeZone());
  EXPECT_THAT(table, HasSubstr("RANK  HEADLINE"));
  EXPECT_THAT(table, HasSubstr("   1  2500 GB/s ±0.4%"));
  EXPECT_THAT(table, HasSubstr("1.000x  g@abcdef012345 (g.cu)  ana   exp-2  NVIDIA H100"));
  EXPECT_THAT(table, HasSubstr("0.800x  ours"));
  EXPECT_THAT(table, HasSubstr("1970-01-01 00:01"));
  const google::protobuf::Struct json = BoardRowStruct(rows[0]);
  EXPECT_EQ(json.fields().at("kernel").string_value(), "g@abcdef012345 (g.cu)");
  EXPECT_EQ(json.fields().at("sourceSha256").string_value(), "abcdef0123456789");
  EXPECT_DOUBLE_EQ(json.fields().at("value").number_value(), 2500);
}

}  // namespace
}  // namespace gpuprof::client
