#include "client/submit_command_line.h"

#include <string>
#include <vector>

#include "client/command_line.h"
#include "client/request_builder.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace gpuprof::client {
namespace {

v1::ExperimentRequest Request(const std::string& text) {
  v1::ExperimentRequest request;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &request)) << text;
  return request;
}

// What a POSIX shell makes of the line: words split on spaces, '...' quoted, \' outside quotes.
std::vector<std::string> ShellWords(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false, quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '\'') {
        quoted = false;
      } else {
        word += c;
      }
    } else if (c == '\'') {
      quoted = in_word = true;
    } else if (c == '\\' && i + 1 < line.size()) {
      word += line[++i];
      in_word = true;
    } else if (c == ' ') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

// The line parsed back as `gpuprof submit` parses its arguments.
v1::ExperimentRequest ParseBack(const std::string& line) {
  const std::vector<std::string> words = ShellWords(line);
  EXPECT_GE(words.size(), 3u);
  EXPECT_EQ(words[0], "gpuprof");
  EXPECT_EQ(words[1], "submit");
  absl::StatusOr<ExperimentRequestBuilder> builder = ExperimentRequestBuilder::ForWorkload(words[2]);
  EXPECT_TRUE(builder.ok()) << builder.status();
  std::vector<FlagSpec> specs = builder->workload_flags();
  specs.insert(specs.end(), builder->common_flags().begin(), builder->common_flags().end());
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(std::vector<std::string>(words.begin() + 3, words.end()), specs);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<v1::ExperimentRequest> request = builder->Build(*parsed);
  EXPECT_TRUE(request.ok()) << request.status();
  return *request;
}

void ExpectRoundTrip(const v1::ExperimentRequest& request) {
  absl::StatusOr<std::vector<std::string>> words = SubmitCommandWords(request);
  ASSERT_TRUE(words.ok()) << words.status();
  const std::string line = ShellCommandLine(*words);
  const v1::ExperimentRequest back = ParseBack(line);
  google::protobuf::util::MessageDifferencer differencer;
  differencer.set_message_field_comparison(
      google::protobuf::util::MessageDifferencer::EQUIVALENT);
  std::string differences;
  differencer.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differencer.Compare(request, back)) << line << "\n" << differences;
}

TEST(SubmitCommandLineTest, AttentionWithEveryKindOfField) {
  ExpectRoundTrip(Request(R"pb(
    attention {
      phase: ATTENTION_PHASE_PREFILL
      batch_size: 3
      q_lens: [ 128, 256, 1 ]
      kv_lens: [ 1024, 4096, 1454616 ]
      num_qo_heads: 64
      num_kv_heads: 8
      head_dim: 128
      causal: true
      dtype: DATA_TYPE_FP16
      seed: 18446744073709551615
    }
    gpus { gpu_ids: [ 0, 1 ] }
    tp_degree: 2
    priority: -3
    timeout { seconds: 90 nanos: 500000000 }
    labels { key: "team" value: "serving, it's ours" }
    labels { key: "run" value: "a=b" }
    measurement { noise_target: 0.0123456789 time_budget { seconds: 2 } l2_mode: L2_MODE_COLD }
    description: "prefill at 64 heads; $HOME and `quotes` stay text"
  )pb"));
}

TEST(SubmitCommandLineTest, OtherWorkloads) {
  ExpectRoundTrip(Request("radix { num_requests: 300 }"));
  ExpectRoundTrip(Request("collective { op: COLLECTIVE_OP_ALL_GATHER bytes_per_rank: 67108864 }"
                          " gpus { gpu_count: 2 }"));
  ExpectRoundTrip(Request("index {}"));
}

TEST(SubmitCommandLineTest, ExactLine) {
  const auto words = SubmitCommandWords(Request(
      "radix { num_requests: 300 } labels { key: \"note\" value: \"it's\" } priority: 2"));
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(ShellCommandLine(*words),
            "gpuprof submit radix --num-requests 300 --priority 2 --label 'note=it'\\''s'");
}

TEST(SubmitCommandLineTest, SaysWhatNoFlagCanSay) {
  const auto words = SubmitCommandWords(Request(
      "index {} tracing { level: LEVEL_METRICS extra_metrics: \"a,b\" }"));
  ASSERT_FALSE(words.ok());
  EXPECT_EQ(words.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(words.status().message().find("extra_metrics"), std::string::npos)
      << words.status();
  EXPECT_FALSE(SubmitCommandWords(v1::ExperimentRequest()).ok());
}

TEST(SubmitCommandLineTest, ReproducesTheParametersTheRunUsed) {
  v1::Experiment experiment;
  *experiment.mutable_request() = Request("attention { dtype: DATA_TYPE_FP16 } user: \"alice\"");
  *experiment.mutable_result()->mutable_provenance()->mutable_request() = Request(
      "attention { dtype: DATA_TYPE_FP16 phase: ATTENTION_PHASE_DECODE batch_size: 32 } "
      "user: \"alice\" priority: 9");
  const v1::ExperimentRequest request = RequestToReproduce(experiment);
  EXPECT_EQ(request.attention().batch_size(), 32);
  EXPECT_EQ(request.priority(), 0);  // only the workload's parameters come from the run
  EXPECT_TRUE(request.user().empty());
}

}  // namespace
}  // namespace gpuprof::client
