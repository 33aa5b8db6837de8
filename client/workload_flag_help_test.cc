#include "client/workload_flag_help.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::client {
namespace {

using ::testing::HasSubstr;

const FlagSpec& Flag(const std::vector<FlagSpec>& flags, const std::string& name) {
  for (const FlagSpec& flag : flags) {
    if (flag.name == name) return flag;
  }
  static const FlagSpec none;
  ADD_FAILURE() << "no flag --" << name;
  return none;
}

TEST(WorkloadFlagHelpTest, FlagsSayTheirCommentAndTheDaemonsDefault) {
  const auto index = ExperimentRequestBuilder::ForWorkload("index");
  ASSERT_TRUE(index.ok());
  const std::vector<FlagSpec> flags = DescribedWorkloadFlags(*index);
  EXPECT_EQ(Flag(flags, "num-splits").help,
            "Warps that cooperate on one row; 0 picks a value from the row size.");
  // A trailing comment, and the default the index spec fills in.
  EXPECT_EQ(Flag(flags, "num-tokens").help, "Token ids gathered per launch. (default: 4096)");
  const auto attention = ExperimentRequestBuilder::ForWorkload("attention");
  ASSERT_TRUE(attention.ok());
  const std::vector<FlagSpec> attention_flags = DescribedWorkloadFlags(*attention);
  EXPECT_EQ(Flag(attention_flags, "kv-len").help, "Cached tokens per sequence. (default: 4096)");
  EXPECT_THAT(Flag(attention_flags, "phase").help, HasSubstr("(default: decode)"));
}

TEST(WorkloadFlagHelpTest, EnumsOfferOnlyWhatTheWorkloadAccepts) {
  const auto attention = ExperimentRequestBuilder::ForWorkload("attention");
  ASSERT_TRUE(attention.ok());
  // The daemon takes fp16 and bf16 for attention; the API's DataType has more.
  EXPECT_EQ(Flag(DescribedWorkloadFlags(*attention), "dtype").value_syntax, "fp16|bf16");
  EXPECT_THAT(Flag(attention->workload_flags(), "dtype").value_syntax, HasSubstr("fp32"));
}

TEST(WorkloadFlagHelpTest, AnExplicitZeroTheDaemonWouldReplaceIsRefused) {
  const auto radix = ExperimentRequestBuilder::ForWorkload("radix");
  ASSERT_TRUE(radix.ok());
  for (const std::vector<std::string>& words :
       {std::vector<std::string>{"--requests", "0"},
        std::vector<std::string>{"--num-requests=0"}}) {
    const auto parsed = ParseArgs(words, radix->workload_flags());
    ASSERT_TRUE(parsed.ok());
    const auto request = radix->Build(*parsed);
    ASSERT_TRUE(request.ok());
    const absl::Status status = CheckNoSilentZeros(*radix, *parsed, *request);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("radix.num_requests of 0 means unset"));
    EXPECT_THAT(status.message(), HasSubstr("must be in ["));
  }
  const auto parsed = ParseArgs({"--requests", "300"}, radix->workload_flags());
  EXPECT_TRUE(CheckNoSilentZeros(*radix, *parsed, *radix->Build(*parsed)).ok());

  // Where 0 means something (index: "0 picks a value"), an explicit 0 is fine.
  const auto index = ExperimentRequestBuilder::ForWorkload("index");
  const auto splits = ParseArgs({"--num-splits", "0"}, index->workload_flags());
  EXPECT_TRUE(CheckNoSilentZeros(*index, *splits, *index->Build(*splits)).ok());
}

// The common flags whose 0 the daemon replaces are refused; those whose 0 means something
// (no warm-up, no noise target, no graph, priority 0) are sent as given.
TEST(WorkloadFlagHelpTest, ACommonFlagsZeroIsRefusedOrHonoured) {
  const auto index = ExperimentRequestBuilder::ForWorkload("index");
  ASSERT_TRUE(index.ok());
  const std::vector<FlagSpec>& common = index->common_flags();
  std::vector<FlagSpec> flags = index->workload_flags();
  flags.insert(flags.end(), common.begin(), common.end());
  const auto check = [&](std::vector<std::string> words) {
    const auto parsed = ParseArgs(words, flags);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    const auto request = index->Build(*parsed);
    EXPECT_TRUE(request.ok()) << request.status();
    return CheckNoSilentZeros(*index, *parsed, *request);
  };
  EXPECT_THAT(check({"--min-iters", "0"}).message(),
              HasSubstr("--min-iters 0: measurement.min_iterations of 0 means unset, which the "
                        "daemon replaces by its default (100 on a GPU, 5 passes for radix); give "
                        "at least 1"));
  EXPECT_THAT(check({"--time-budget", "0s"}).message(),
              HasSubstr("measurement.time_budget of 0 means unset"));
  EXPECT_THAT(check({"--timeout=0"}).message(), HasSubstr("timeout of 0 means unset"));
  EXPECT_EQ(check({"--max-iters", "0"}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(check({"--tp", "0"}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(check({"--min-iters", "10", "--timeout", "5m"}).ok());
  for (const std::vector<std::string>& meaningful :
       {std::vector<std::string>{"--warmup", "0"}, std::vector<std::string>{"--noise", "0"},
        std::vector<std::string>{"--graph", "0"}, std::vector<std::string>{"--priority", "0"}}) {
    EXPECT_TRUE(check(meaningful).ok()) << meaningful[0];
  }
  // Sent as given: present in the request, so the daemon keeps the 0.
  const auto parsed = ParseArgs({"--warmup", "0", "--noise", "0"}, flags);
  const auto request = index->Build(*parsed);
  ASSERT_TRUE(request.ok());
  EXPECT_TRUE(request->measurement().has_warmup_iterations());
  EXPECT_TRUE(request->measurement().has_noise_target());
}

}  // namespace
}  // namespace gpuprof::client
