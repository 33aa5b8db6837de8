#include "client/compare_commands.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace gpuprof::client {
namespace {

using ::testing::HasSubstr;

v1::Experiment IndexRun(double gbps, double noise) {
  v1::Experiment experiment;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(workload: WORKLOAD_INDEX state: FINISHED request { index { num_tokens: 64 } })pb",
      &experiment));
  auto* measurement = experiment.mutable_result()->mutable_measurement();
  measurement->set_bandwidth_gbps(gbps);
  measurement->mutable_kernel_time()->set_samples(200);
  measurement->mutable_kernel_time()->set_median_us(1.5);
  measurement->mutable_kernel_time()->set_relative_noise(noise);
  return experiment;
}

class CompareOutputTest : public ::testing::Test {
 protected:
  // `gpuprof compare A B ARGS...` of two one-point runs; stdout.
  std::string Compare(const std::vector<std::string>& args) {
    std::vector<std::string> words = {"exp-1", "exp-2"};
    words.insert(words.end(), args.begin(), args.end());
    const auto parsed = ParseArgs(words, CompareCommand().flags());
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    out_.str("");
    err_.str("");
    env_.out = &out_;
    env_.err = &err_;
    exit_code_ = CompareAndPrint(env_, *parsed, [](const std::string& name, sweep::CompareSide& side) {
      side.id = name;
      side.points.push_back(name == "exp-1" ? IndexRun(1454616, 0.01) : IndexRun(1454616.125, 0.01));
      return int{kExitOk};
    });
    return out_.str();
  }

  ClientEnvironment env_;
  std::ostringstream out_, err_;
  int exit_code_ = -1;
};

TEST_F(CompareOutputTest, MarkdownRowsHaveTheHeadersCells) {
  const std::string markdown = Compare({"--format", "markdown"});
  EXPECT_EQ(exit_code_, kExitOk);
  const std::vector<std::string> lines = absl::StrSplit(markdown, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << markdown;
  const auto cells = [](const std::string& line) { return std::count(line.begin(), line.end(), '|'); };
  EXPECT_EQ(cells(lines[2]), cells(lines[0])) << markdown;
  EXPECT_THAT(lines[0], HasSubstr("| change |"));
  EXPECT_THAT(lines[2], HasSubstr("| +0.0% |"));
}

TEST_F(CompareOutputTest, CsvAndJsonLinesCarryFullPrecisionAndTheSummaryGoesToStderr) {
  EXPECT_EQ(Compare({"--format", "csv"}),
            "point,figure,a,b,unit,ratio,change_pct,noise_a,noise_b,noise,verdict\n"
            "(single point),bandwidth,1454616,1454616.125,GB/s,1.0000000859333322,"
            "8.593333222783883e-06,0.01,0.01,0.03084211122492953,same\n");
  EXPECT_THAT(err_.str(), HasSubstr("1 point(s) compared"));
  const std::string json = Compare({"--json"});
  EXPECT_EQ(json, Compare({"--format", "jsonl"}));
  EXPECT_EQ(json,
            "{\"point\":\"(single point)\",\"figure\":\"bandwidth\",\"a\":1454616,"
            "\"b\":1454616.125,\"unit\":\"GB/s\",\"ratio\":1.0000000859333322,"
            "\"change_pct\":8.593333222783883e-06,\"noise_a\":0.01,\"noise_b\":0.01,"
            "\"noise\":0.03084211122492953,\"verdict\":\"same\"}\n");
  Compare({"--json", "--format", "csv"});
  EXPECT_EQ(exit_code_, kExitUsage);
}

}  // namespace
}  // namespace gpuprof::client
