#include "client/request_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_replace.h"

namespace gpuprof::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<FlagSpec> AllFlags(const ExperimentRequestBuilder& builder) {
  std::vector<FlagSpec> flags = builder.workload_flags();
  flags.insert(flags.end(), builder.common_flags().begin(), builder.common_flags().end());
  flags.push_back({.name = "follow", .is_switch = true});
  return flags;
}

// What `gpuprof submit <workload> args...` builds, or the error it prints.
absl::StatusOr<v1::ExperimentRequest> Submit(const std::string& workload,
                                             const std::vector<std::string>& args) {
  absl::StatusOr<ExperimentRequestBuilder> builder =
      ExperimentRequestBuilder::ForWorkload(workload);
  if (!builder.ok()) return builder.status();
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, AllFlags(*builder));
  if (!parsed.ok()) return parsed.status();
  return builder->Build(*parsed);
}

TEST(WorkloadNamesTest, AreTheOneofFields) {
  EXPECT_THAT(WorkloadNames(),
              ElementsAre("index", "store", "attention", "collective", "radix", "copy"));
}

TEST(ExperimentRequestBuilderTest, UnknownWorkloadListsTheChoices) {
  auto builder = ExperimentRequestBuilder::ForWorkload("gemm");
  ASSERT_FALSE(builder.ok());
  EXPECT_EQ(
      builder.status().message(),
      "unknown workload \"gemm\"; choose one of index, store, attention, collective, radix, copy");
}

TEST(ExperimentRequestBuilderTest, EverySpecFieldOfEveryWorkloadIsAFlag) {
  for (const std::string& workload : WorkloadNames()) {
    auto builder = ExperimentRequestBuilder::ForWorkload(workload);
    ASSERT_TRUE(builder.ok()) << builder.status();
    EXPECT_THAT(builder->unsettable_fields(), IsEmpty()) << workload;
    absl::flat_hash_set<std::string> flag_names;
    for (const FlagSpec& flag : builder->workload_flags()) flag_names.insert(flag.name);
    const auto* spec = builder->spec_type();
    ASSERT_EQ(builder->workload_flags().size(), static_cast<size_t>(spec->field_count()));
    for (int i = 0; i < spec->field_count(); ++i) {
      // A qualified name would mean the field is shadowed by a common flag: rename one of them.
      const std::string name = absl::StrReplaceAll(spec->field(i)->name(), {{"_", "-"}});
      EXPECT_TRUE(flag_names.contains(name)) << workload << ": " << name;
    }
  }
}

TEST(ExperimentRequestBuilderTest, IndexFlagsByNameAliasAndUnderscore) {
  auto request = Submit(
      "index", {"--tokens", "8K", "--hidden_dim", "4096", "--vocab", "128000", "--dtype", "BF16",
                "--use-pdl", "--vocab-range", "0:64000", "--seed=7", "--num-splits", "2"});
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_TRUE(request->has_index());
  const v1::IndexSpec& spec = request->index();
  EXPECT_EQ(spec.num_tokens(), 8000);
  EXPECT_EQ(spec.hidden_dim(), 4096);
  EXPECT_EQ(spec.vocab_size(), 128000);
  EXPECT_EQ(spec.dtype(), v1::DATA_TYPE_BF16);
  EXPECT_TRUE(spec.use_pdl());
  EXPECT_EQ(spec.vocab_range().start(), 0);
  EXPECT_EQ(spec.vocab_range().end(), 64000);
  EXPECT_EQ(spec.seed(), 7u);
  EXPECT_EQ(spec.num_splits(), 2);
}

TEST(ExperimentRequestBuilderTest, NoFlagsStillSelectsTheWorkload) {
  auto request = Submit("radix", {});
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->workload_case(), v1::ExperimentRequest::kRadix);
}

TEST(ExperimentRequestBuilderTest, StoreAttentionCollectiveRadixFlags) {
  auto store = Submit("store", {"--kv-heads", "8", "--pattern", "random", "--launch", "fused-kv",
                                "--use-pdl=false", "--slots", "1Mi"});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(store->store().num_kv_heads(), 8);
  EXPECT_EQ(store->store().slot_pattern(), v1::SLOT_PATTERN_RANDOM);
  EXPECT_EQ(store->store().launch(), v1::STORE_LAUNCH_FUSED_KV);
  EXPECT_FALSE(store->store().use_pdl());
  EXPECT_EQ(store->store().cache_slots(), 1 << 20);

  auto attention = Submit("attention", {"--phase", "prefill", "--batch", "4", "--heads", "32",
                                        "--kv-heads", "8", "--causal", "--backend", "reference"});
  ASSERT_TRUE(attention.ok()) << attention.status();
  EXPECT_EQ(attention->attention().phase(), v1::ATTENTION_PHASE_PREFILL);
  EXPECT_EQ(attention->attention().batch_size(), 4);
  EXPECT_EQ(attention->attention().num_qo_heads(), 32);
  EXPECT_EQ(attention->attention().num_kv_heads(), 8);
  EXPECT_TRUE(attention->attention().causal());
  EXPECT_EQ(attention->attention().backend(), v1::ATTENTION_BACKEND_REFERENCE);
  auto cudnn = Submit("attention", {"--backend", "cudnn"});
  ASSERT_TRUE(cudnn.ok()) << cudnn.status();
  EXPECT_EQ(cudnn->attention().backend(), v1::ATTENTION_BACKEND_CUDNN);

  auto collective = Submit("collective", {"--op", "all-reduce", "--bytes", "256M", "--buffer-mode",
                                          "registered", "--in-place"});
  ASSERT_TRUE(collective.ok()) << collective.status();
  EXPECT_EQ(collective->collective().op(), v1::COLLECTIVE_OP_ALL_REDUCE);
  EXPECT_EQ(collective->collective().bytes_per_rank(), 256 << 20);
  EXPECT_EQ(collective->collective().buffer_mode(), v1::BUFFER_MODE_REGISTERED);
  EXPECT_TRUE(collective->collective().in_place());

  auto radix = Submit(
      "radix", {"--requests", "10K", "--history-growth-probability", "0.5", "--budget", "1M"});
  ASSERT_TRUE(radix.ok()) << radix.status();
  EXPECT_EQ(radix->radix().num_requests(), 10000);
  EXPECT_DOUBLE_EQ(radix->radix().history_growth_probability(), 0.5);
  EXPECT_EQ(radix->radix().cache_token_budget(), 1000000);
}

TEST(ExperimentRequestBuilderTest, ExplicitZeroOfAnOptionalFieldIsPresent) {
  auto request = Submit("radix", {"--in-flight-requests", "0"});
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_TRUE(request->radix().has_in_flight_requests());
  EXPECT_EQ(request->radix().in_flight_requests(), 0);
  EXPECT_FALSE(request->radix().has_min_tail_tokens());
}

TEST(ExperimentRequestBuilderTest, CommonFlags) {
  auto request = Submit("index", {"--gpus",        "0,1",
                                  "--gpus",        "3",
                                  "--gpu-count",   "3",
                                  "--placement",   "same-numa",
                                  "--tp",          "2",
                                  "--priority",    "-1",
                                  "--timeout",     "10m",
                                  "--label",       "team=serving",
                                  "--label",       "run=3",
                                  "--warmup",      "10",
                                  "--min-iters",   "20",
                                  "--max-iters",   "1K",
                                  "--time-budget", "2.5s",
                                  "--noise",       "0.01",
                                  "--l2",          "cold",
                                  "--graph",       "8",
                                  "--trace",       "metrics",
                                  "--metric",      "dram__bytes.sum",
                                  "--metric",      "sm__cycles",
                                  "--user",        "alice",
                                  "--description", "baseline run",
                                  "--follow"});
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_THAT(request->gpus().gpu_ids(), ElementsAre(0, 1, 3));
  EXPECT_EQ(request->gpus().gpu_count(), 3);
  EXPECT_EQ(request->gpus().placement(), v1::GpuSelection::PLACEMENT_SAME_NUMA);
  EXPECT_EQ(request->tp_degree(), 2);
  EXPECT_EQ(request->priority(), -1);
  EXPECT_EQ(request->timeout().seconds(), 600);
  EXPECT_EQ(request->labels().size(), 2u);
  EXPECT_EQ(request->labels().at("team"), "serving");
  const v1::MeasurementOptions& measurement = request->measurement();
  EXPECT_EQ(measurement.warmup_iterations(), 10);
  EXPECT_EQ(measurement.min_iterations(), 20);
  EXPECT_EQ(measurement.max_iterations(), 1000);
  EXPECT_EQ(measurement.time_budget().seconds(), 2);
  EXPECT_EQ(measurement.time_budget().nanos(), 500000000);
  EXPECT_DOUBLE_EQ(measurement.noise_target(), 0.01);
  EXPECT_EQ(measurement.l2_mode(), v1::MeasurementOptions::L2_MODE_COLD);
  EXPECT_EQ(measurement.graph_launches_per_sample(), 8);
  EXPECT_EQ(request->tracing().level(), v1::TracingOptions::LEVEL_METRICS);
  EXPECT_THAT(request->tracing().extra_metrics(), ElementsAre("dram__bytes.sum", "sm__cycles"));
  EXPECT_EQ(request->user(), "alice");
  EXPECT_EQ(request->description(), "baseline run");
  EXPECT_TRUE(request->has_index());
}

TEST(ExperimentRequestBuilderTest, UnsetOptionsStayUnset) {
  auto request = Submit("index", {"--tokens", "1"});
  ASSERT_TRUE(request.ok());
  EXPECT_FALSE(request->has_gpus());
  EXPECT_FALSE(request->has_measurement());
  EXPECT_FALSE(request->has_timeout());
  EXPECT_EQ(request->user(), "");
}

TEST(ExperimentRequestBuilderTest, TextThatIsNotUtf8IsRefusedBeforeSending) {
  absl::StatusOr<v1::ExperimentRequest> label = Submit("radix", {"--label", "team=ml\xff"});
  ASSERT_FALSE(label.ok());
  EXPECT_EQ(label.status().message(),
            "--label: byte 0xFF at byte 7 is not UTF-8; text sent to gpuprofd must be UTF-8");
  absl::StatusOr<v1::ExperimentRequest> description = Submit("radix", {"--description=caf\xc3"});
  EXPECT_THAT(description.status().message(), HasSubstr("--description: byte 0xC3 at byte 3"));
  // UTF-8 beyond ASCII is text like any other.
  EXPECT_TRUE(Submit("radix", {"--description", "caf\xc3\xa9"}).ok());
}

TEST(ExperimentRequestBuilderTest, ErrorsNameTheFlagAsTyped) {
  struct Case {
    std::string workload;
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {"index",
       {"--dtype", "bf61"},
       "--dtype: \"bf61\" is not one of fp32, fp16, bf16, fp8-e4m3, int8, int32, fp8-e5m2"},
      {"index", {"--tokens", "lots"}, "--tokens: \"lots\" is not an integer"},
      {"index", {"--num_tokens", "1.5"}, "--num_tokens: \"1.5\" is not an integer"},
      {"index", {"--use-pdl=maybe"}, "--use-pdl: \"maybe\" is not a boolean (true or false)"},
      {"index", {"--vocab-range", "10"}, "--vocab-range: \"10\" is not START:END"},
      {"index", {"--timeout", "90"}, "--timeout: \"90\" is not a duration"},
      {"index", {"--gpus", "0,a"}, "--gpus: \"a\" is not an integer"},
      {"index", {"--label", "team"}, "--label: \"team\" is not KEY=VALUE"},
      {"index", {"--l2", "warm"}, "--l2: \"warm\" is not one of hot, cold"},
      {"index",
       {"--trace", "everything"},
       "--trace: \"everything\" is not one of off, activity, metrics, full"},
      {"index",
       {"--placement", "far"},
       "--placement: \"far\" is not one of any, nvlink, same-numa"},
      {"index", {"--noise", "low"}, "--noise: \"low\" is not a number"},
      {"index", {"--threads", "5G"}, "--threads: \"5G\" is out of range"},
      {"index", {"--tokens"}, "--tokens needs a value (INT)"},
      {"index", {"--bytes", "1"}, "unknown flag --bytes"},
      {"index", {"--toknes", "1"}, "unknown flag --toknes (did you mean --tokens?)"},
      {"collective",
       {"--op", "allreduce"},
       "--op: \"allreduce\" is not one of all-reduce, all-gather, reduce-scatter, broadcast, "
       "all-to-all"},
  };
  for (const Case& c : cases) {
    auto request = Submit(c.workload, c.args);
    ASSERT_FALSE(request.ok()) << c.args[0];
    EXPECT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(request.status().message()), HasSubstr(c.message));
  }
}

TEST(ExperimentRequestBuilderTest, MinTimeSetsTheFloorAndAnExplicitZeroIsKept) {
  auto request = Submit("index", {"--min-time", "100ms"});
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->measurement().min_time().nanos(), 100'000'000);
  request = Submit("index", {"--min-time", "0s"});
  ASSERT_TRUE(request.ok()) << request.status();
  // Present and zero: no time floor, where absent takes the daemon's default.
  EXPECT_TRUE(request->measurement().has_min_time());
  EXPECT_EQ(request->measurement().min_time().seconds(), 0);
}

TEST(ExperimentRequestBuilderTest, FlagHelpCarriesTypesAndChoices) {
  auto builder = ExperimentRequestBuilder::ForWorkload("index");
  ASSERT_TRUE(builder.ok());
  const FlagSpec& num_tokens = builder->workload_flags()[0];
  EXPECT_EQ(num_tokens.name, "num-tokens");
  EXPECT_EQ(num_tokens.value_syntax, "INT");
  EXPECT_EQ(num_tokens.help, "int64");
  EXPECT_THAT(num_tokens.aliases, ElementsAre("tokens"));
  const std::string help = FormatFlagHelp(builder->workload_flags());
  EXPECT_THAT(help, HasSubstr("--dtype fp32|fp16|bf16|fp8-e4m3|int8|int32|fp8-e5m2\n"));
  EXPECT_THAT(help, HasSubstr("--num-tokens INT         int64 (alias --tokens)\n"));
  EXPECT_THAT(help, HasSubstr("--use-pdl[=BOOL]"));
  EXPECT_THAT(help, HasSubstr("--vocab-range START:END"));
  EXPECT_THAT(FormatFlagHelp(builder->common_flags()), HasSubstr("--label KEY=VALUE"));
}

}  // namespace
}  // namespace gpuprof::client
