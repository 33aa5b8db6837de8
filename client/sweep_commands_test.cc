#include "client/sweep_commands.h"

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sweep/sweep_expansion.h"

namespace gpuprof::client {
namespace {

using ::testing::HasSubstr;

class ParseSweepSubmissionTest : public ::testing::Test {
 protected:
  ParseSweepSubmissionTest() {
    env_.out = &out_;
    env_.err = &err_;
  }

  std::optional<SweepSubmission> Parse(const std::vector<std::string>& args) {
    return ParseSweepSubmission(args, env_, std::nullopt, exit_code_);
  }

  std::ostringstream out_, err_;
  ClientEnvironment env_;
  int exit_code_ = -1;
};

TEST_F(ParseSweepSubmissionTest, ABooleanFieldIsAnAxis) {
  const std::optional<SweepSubmission> submission =
      Parse({"attention", "--phase", "prefill", "--q-len", "2048", "--kv-len", "2048",
             "--causal=true,false", "--backend", "gpuprof,cudnn"});
  ASSERT_TRUE(submission.has_value()) << err_.str();
  ASSERT_EQ(submission->request.axes_size(), 2);
  EXPECT_EQ(submission->request.axes(0).field(), "causal");
  absl::StatusOr<std::vector<sweep::ExpandedPoint>> points =
      sweep::ExpandSweep(submission->request);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 4u);
  EXPECT_EQ(sweep::DescribeParameters((*points)[0].parameters), "causal=true, backend=gpuprof");
  EXPECT_TRUE((*points)[0].request.attention().causal());
  EXPECT_EQ(sweep::DescribeParameters((*points)[3].parameters), "causal=false, backend=cudnn");
  EXPECT_FALSE((*points)[3].request.attention().causal());
}

TEST_F(ParseSweepSubmissionTest, ASweepsOwnSwitchTakesOneValue) {
  EXPECT_FALSE(Parse({"index", "--tokens", "1,64", "--follow=true,false"}).has_value());
  EXPECT_EQ(exit_code_, 2);
  EXPECT_THAT(err_.str(), HasSubstr("--follow: takes one value; only a request's fields can be an axis"));
}

}  // namespace
}  // namespace gpuprof::client
