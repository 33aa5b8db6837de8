#include "daemon/admission/request_validation.h"

#include <cstdint>
#include <limits>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/admission/test_inventory.h"
#include "google/protobuf/util/time_util.h"
#include "workloads/attention/attention_spec.h"
#include "workloads/spec_table.h"

namespace gpuprof::daemon {
namespace {

using ::google::protobuf::util::TimeUtil;
using ::testing::HasSubstr;

v1::ListGpusResponse NoGpus() {
  v1::ListGpusResponse inventory;
  inventory.set_probe_error("no CUDA driver");
  inventory.add_supported_workloads("radix");
  inventory.add_supported_workloads("index");
  inventory.add_supported_workloads("store");
  return inventory;
}

v1::ListGpusResponse TwoNvlinkGpus() { return daemon::TwoNvlinkGpus({"radix", "index", "store"}); }

absl::Status Check(v1::ExperimentRequest request, const v1::ListGpusResponse& inventory,
                   ValidationLimits limits = {}) {
  if (request.user().empty()) request.set_user("alice");
  ApplyRequestDefaults(limits, inventory, request);
  return ValidateExperimentRequest(request, inventory, limits);
}

v1::ExperimentRequest Radix() {
  v1::ExperimentRequest request;
  request.mutable_radix();
  return request;
}

v1::ExperimentRequest Index(int64_t tokens) {
  v1::ExperimentRequest request;
  request.mutable_index()->set_num_tokens(tokens);
  return request;
}

TEST(RequestValidation, DefaultsMakeAnEmptyRadixRequestValid) {
  EXPECT_TRUE(Check(Radix(), NoGpus()).ok()) << Check(Radix(), NoGpus());
}

TEST(RequestValidation, DefaultsAreFilledAndKeepExplicitZeros) {
  v1::ExperimentRequest request = Radix();
  request.mutable_radix()->set_history_growth_probability(0.0);
  request.mutable_radix()->set_system_prompt_tokens(0);
  ApplyRequestDefaults({}, NoGpus(), request);
  EXPECT_EQ(request.radix().history_growth_probability(), 0.0);
  EXPECT_EQ(request.radix().system_prompt_tokens(), 0);
  EXPECT_EQ(request.radix().num_requests(), 2000);
  EXPECT_EQ(TimeUtil::DurationToSeconds(request.timeout()), 30 * 60);
  // A CPU workload carries no GPU measurement or tracing options.
  EXPECT_FALSE(request.has_measurement());
  EXPECT_FALSE(request.has_tracing());

  v1::ExperimentRequest index = Index(64);
  ApplyRequestDefaults({}, TwoNvlinkGpus(), index);
  EXPECT_EQ(index.tracing().level(), v1::TracingOptions::LEVEL_ACTIVITY);
  EXPECT_EQ(index.measurement().warmup_iterations(), 10);
  // The floor under the noise target: 100 samples and 50 ms of measured time.
  EXPECT_EQ(index.measurement().min_iterations(), 100);
  EXPECT_EQ(TimeUtil::DurationToMilliseconds(index.measurement().min_time()), 50);
  // An explicit zero min_time (no time floor) is kept, not replaced by the default.
  v1::ExperimentRequest no_time_floor = Index(64);
  *no_time_floor.mutable_measurement()->mutable_min_time() = TimeUtil::SecondsToDuration(0);
  ApplyRequestDefaults({}, TwoNvlinkGpus(), no_time_floor);
  EXPECT_TRUE(no_time_floor.measurement().has_min_time());
  EXPECT_EQ(TimeUtil::DurationToNanoseconds(no_time_floor.measurement().min_time()), 0);
  EXPECT_EQ(index.measurement().noise_target(), 0.01);
  // So are an explicit 0 warm-up iterations and noise target (sample to the max or budget).
  v1::ExperimentRequest explicit_zeros = Index(64);
  explicit_zeros.mutable_measurement()->set_warmup_iterations(0);
  explicit_zeros.mutable_measurement()->set_noise_target(0);
  ApplyRequestDefaults({}, TwoNvlinkGpus(), explicit_zeros);
  EXPECT_TRUE(explicit_zeros.measurement().has_warmup_iterations());
  EXPECT_EQ(explicit_zeros.measurement().warmup_iterations(), 0);
  EXPECT_TRUE(explicit_zeros.measurement().has_noise_target());
  EXPECT_EQ(explicit_zeros.measurement().noise_target(), 0);
}

TEST(RequestValidation, MissingWorkloadNamesTheChoices) {
  const absl::Status status = Check(v1::ExperimentRequest(), NoGpus());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("workload: not set; must be one of index"));
}

TEST(RequestValidation, NegativeSizeNamesFieldValueAndRange) {
  const absl::Status status = Check(Index(-5), TwoNvlinkGpus());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "index.num_tokens: got -5; must be in [1, 16777216]");

  v1::ExperimentRequest radix = Radix();
  radix.mutable_radix()->set_page_size(-1);
  EXPECT_EQ(Check(radix, NoGpus()).message(), "radix.page_size: got -1; must be in [1, 4096]");
}

TEST(RequestValidation, OverflowingSizesAreRefused) {
  v1::ExperimentRequest request;
  auto* store = request.mutable_store();
  store->set_num_tokens(16);
  store->set_num_kv_heads(1024);
  store->set_head_dim(1024);
  store->set_cache_slots(int64_t{1} << 31);
  const absl::Status status = Check(request, TwoNvlinkGpus());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("store (K and V caches): needs"));
  EXPECT_THAT(status.message(), HasSubstr("more than the GPU's memory"));
}

TEST(RequestValidation, IndexKernelShapeLimits) {
  v1::ExperimentRequest request = Index(64);
  request.mutable_index()->set_hidden_dim(100);
  request.mutable_index()->set_num_splits(16);
  EXPECT_EQ(Check(request, TwoNvlinkGpus()).message(),
            "index.num_splits: got 16; must divide the row of 200 bytes (hidden_dim 100 x "
            "2-byte bf16)");
  request.mutable_index()->set_num_splits(8);
  EXPECT_TRUE(Check(request, TwoNvlinkGpus()).ok());
  request.mutable_index()->set_threads(1024);
  request.mutable_index()->set_max_occupancy(4);
  EXPECT_EQ(Check(request, TwoNvlinkGpus()).message(),
            "index.max_occupancy: got 4; must be at most 2 for 1024 threads per block (2048 "
            "threads per SM)");
}

TEST(RequestValidation, StoreKernelShapeLimits) {
  v1::ListGpusResponse inventory = TwoNvlinkGpus();
  inventory.add_supported_workloads("store");
  v1::ExperimentRequest request;
  auto* store = request.mutable_store();
  store->set_num_tokens(33);
  store->set_page_size(16);
  store->set_cache_slots(48);
  EXPECT_TRUE(Check(request, inventory).ok());
  store->set_num_kv_heads(256);
  store->set_head_dim(1024);  // 512 KiB of bf16 per token
  EXPECT_THAT(Check(request, inventory).message(),
              HasSubstr("store.num_kv_heads: got 256; num_kv_heads x head_dim x element bytes "
                        "is 524288 bytes per token and must be at most 262144"));
}

TEST(RequestValidation, AttentionHeadSizesDependOnTheBackend) {
  v1::ListGpusResponse inventory = TwoNvlinkGpus();
  inventory.add_supported_workloads("attention");
  v1::ExperimentRequest request;
  auto* attention = request.mutable_attention();
  attention->set_phase(v1::ATTENTION_PHASE_PREFILL);
  attention->set_head_dim(96);
  EXPECT_EQ(Check(request, inventory).message(),
            "attention.head_dim: got 96; prefill takes 64, 128, 256 (the cuDNN backend any "
            "multiple of 8 up to 256)");
  attention->set_head_dim(256);
  EXPECT_TRUE(Check(request, inventory).ok()) << Check(request, inventory);
  attention->set_head_dim(96);
  // cuDNN takes any multiple of 8 up to 256, for prefill and decode alike.
  attention->set_backend(v1::ATTENTION_BACKEND_CUDNN);
  EXPECT_TRUE(Check(request, inventory).ok()) << Check(request, inventory);
  attention->set_head_dim(100);
  EXPECT_EQ(Check(request, inventory).message(),
            "attention.head_dim: got 100; the cuDNN backend takes multiples of 8 up to 256");
  attention->set_head_dim(264);
  EXPECT_THAT(Check(request, inventory).message(), HasSubstr("the cuDNN backend takes"));
}

TEST(RequestValidation, AttentionFp8RunsInOurPrefillOrTheReference) {
  v1::ListGpusResponse inventory = TwoNvlinkGpus();
  inventory.add_supported_workloads("attention");
  v1::ExperimentRequest request;
  auto* attention = request.mutable_attention();
  attention->set_phase(v1::ATTENTION_PHASE_PREFILL);
  attention->set_dtype(v1::DATA_TYPE_FP8_E4M3);
  EXPECT_TRUE(Check(request, inventory).ok()) << Check(request, inventory);
  attention->set_backend(v1::ATTENTION_BACKEND_REFERENCE);
  EXPECT_TRUE(Check(request, inventory).ok()) << Check(request, inventory);
  const std::string refused =
      "attention.dtype: got fp8-e4m3; fp8 e4m3 runs only in the prefill phase with the gpuprof "
      "or reference backend, on H100/H200 (sm_90)";
  attention->set_backend(v1::ATTENTION_BACKEND_CUDNN);
  EXPECT_EQ(Check(request, inventory).message(), refused);
  attention->set_backend(v1::ATTENTION_BACKEND_GPUPROF);
  attention->set_phase(v1::ATTENTION_PHASE_DECODE);
  EXPECT_EQ(Check(request, inventory).message(), refused);
  attention->clear_phase();  // decode by default
  EXPECT_EQ(Check(request, inventory).message(), refused);
  // Our fp8 kernel loads whole 16-row boxes of a page; the reference takes any page size.
  attention->set_phase(v1::ATTENTION_PHASE_PREFILL);
  attention->set_page_size(8);
  EXPECT_EQ(Check(request, inventory).message(),
            "attention.page_size: got 8; the fp8 e4m3 prefill takes pages of 16 rows or a "
            "multiple of 16 (bf16 and fp16 take any power of two)");
  attention->set_backend(v1::ATTENTION_BACKEND_REFERENCE);
  EXPECT_TRUE(Check(request, inventory).ok()) << Check(request, inventory);
  attention->set_backend(v1::ATTENTION_BACKEND_GPUPROF);
  attention->set_page_size(32);
  EXPECT_TRUE(Check(request, inventory).ok()) << Check(request, inventory);
  attention->clear_phase();
  // Other types name fp8 among the choices only where it runs.
  attention->set_dtype(v1::DATA_TYPE_FP32);
  EXPECT_EQ(Check(request, inventory).message(),
            "attention.dtype: got fp32; must be one of fp16, bf16");
  attention->set_phase(v1::ATTENTION_PHASE_PREFILL);
  EXPECT_EQ(Check(request, inventory).message(),
            "attention.dtype: got fp32; must be one of fp16, bf16, fp8-e4m3");
}

TEST(RequestValidation, AttentionFp8CachesTakeOneByteAnElement) {
  v1::ListGpusResponse inventory = TwoNvlinkGpus();  // 80 GiB GPUs
  inventory.add_supported_workloads("attention");
  v1::ExperimentRequest request;
  auto* attention = request.mutable_attention();
  attention->set_phase(v1::ATTENTION_PHASE_PREFILL);
  // 30 sequences of 1Mi tokens, 8 KV heads x 128: K and V take 120 GiB in bf16, 60 in fp8.
  attention->set_batch_size(30);
  attention->set_kv_len(int64_t{1} << 20);
  attention->set_num_kv_heads(8);
  attention->set_head_dim(128);
  attention->set_dtype(v1::DATA_TYPE_BF16);
  EXPECT_THAT(Check(request, inventory).message(),
              HasSubstr("attention (paged K and V caches): needs 120.00 GiB"));
  attention->set_dtype(v1::DATA_TYPE_FP8_E4M3);
  EXPECT_TRUE(Check(request, inventory).ok()) << Check(request, inventory);
}

TEST(RequestValidation, RaggedAttentionBatchesNameTheSequence) {
  v1::ListGpusResponse inventory = TwoNvlinkGpus();
  inventory.add_supported_workloads("attention");
  v1::ExperimentRequest request;
  auto* attention = request.mutable_attention();
  attention->set_phase(v1::ATTENTION_PHASE_PREFILL);
  for (int64_t q : {100, 257, 512}) attention->add_q_lens(q);
  for (int64_t kv : {1000, 257}) attention->add_kv_lens(kv);
  EXPECT_EQ(Check(request, inventory).message(),
            "attention.kv_lens: got 2 entries; must have one per sequence, as q_lens (3)");
  attention->add_kv_lens(300);
  EXPECT_THAT(Check(request, inventory).message(), HasSubstr("attention.q_lens[2]: got 512"));
  attention->set_kv_lens(2, 512);
  ASSERT_TRUE(Check(request, inventory).ok()) << Check(request, inventory);
  attention->set_batch_size(4);
  EXPECT_THAT(Check(request, inventory).message(),
              HasSubstr("attention.batch_size: got 4; must be the number of q_lens/kv_lens"));
  attention->set_batch_size(0);
  attention->set_kv_len_max(8192);
  EXPECT_THAT(Check(request, inventory).message(),
              HasSubstr("attention.kv_len_max: must be unset"));
  // Decode: at most 8 queries, and never more than the sequence holds.
  attention->clear_kv_len_max();
  attention->set_phase(v1::ATTENTION_PHASE_DECODE);
  attention->clear_q_lens();
  attention->clear_kv_lens();
  for (int64_t q : {1, 4}) attention->add_q_lens(q);
  for (int64_t kv : {4096, 3}) attention->add_kv_lens(kv);
  EXPECT_THAT(Check(request, inventory).message(), HasSubstr("attention.q_lens[1]: got 4"));
}

TEST(RequestValidation, AttentionLengthsFromADistribution) {
  v1::ExperimentRequest request;
  auto* attention = request.mutable_attention();
  attention->set_phase(v1::ATTENTION_PHASE_PREFILL);
  attention->set_batch_size(64);
  attention->set_kv_len(1024);
  attention->set_kv_len_max(8192);
  attention->set_seed(3);
  v1::ListGpusResponse inventory = TwoNvlinkGpus();
  inventory.add_supported_workloads("attention");
  ASSERT_TRUE(Check(request, inventory).ok()) << Check(request, inventory);
  ApplyRequestDefaults({}, inventory, request);
  EXPECT_EQ(request.attention().q_len(), 8192);  // prefill: every sequence whole
  const workloads::AttentionLengths lengths =
      workloads::ExpandAttentionLengths(request.attention());
  ASSERT_EQ(lengths.kv_lens.size(), 64u);
  int64_t low = 1 << 30, high = 0;
  for (size_t i = 0; i < lengths.kv_lens.size(); ++i) {
    low = std::min(low, lengths.kv_lens[i]);
    high = std::max(high, lengths.kv_lens[i]);
    EXPECT_EQ(lengths.q_lens[i], lengths.kv_lens[i]);
  }
  EXPECT_GE(low, 1024);
  EXPECT_LE(high, 8192);
  EXPECT_LT(low, high);  // drawn, not all equal
  // The same seed draws the same batch; the KV caches' bytes are checked against the GPU.
  EXPECT_EQ(workloads::ExpandAttentionLengths(request.attention()).kv_lens, lengths.kv_lens);
  attention->set_kv_len_max(512);
  EXPECT_THAT(Check(request, inventory).message(), HasSubstr("attention.kv_len_max: got 512"));
}

TEST(RequestValidation, GpuWorkloadWithoutGpusIsFailedPrecondition) {
  const absl::Status status = Check(Index(64), NoGpus());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), "index runs on a GPU and this host has none (no CUDA driver)");
}

TEST(RequestValidation, UnknownAndDuplicateGpuIds) {
  v1::ExperimentRequest unknown = Index(64);
  unknown.mutable_gpus()->add_gpu_ids(7);
  EXPECT_EQ(Check(unknown, TwoNvlinkGpus()).message(),
            "gpus.gpu_ids[0]: GPU 7 does not exist; this host has GPUs 0-1");

  v1::ExperimentRequest duplicate = Index(64);
  duplicate.mutable_gpus()->add_gpu_ids(1);
  duplicate.mutable_gpus()->add_gpu_ids(1);
  EXPECT_EQ(Check(duplicate, TwoNvlinkGpus()).message(), "gpus.gpu_ids[1]: GPU 1 is listed twice");
  // Duplicates are caught without a GPU inventory too.
  EXPECT_EQ(Check(duplicate, NoGpus()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RequestValidation, TpLargerThanGpuSet) {
  v1::ExperimentRequest request = Index(64);
  request.mutable_gpus()->add_gpu_ids(0);
  request.set_tp_degree(2);
  EXPECT_EQ(Check(request, TwoNvlinkGpus()).message(),
            "tp_degree: got 2; must be at most the number of GPUs selected (1)");
}

TEST(RequestValidation, MoreGpusThanTheHostHas) {
  v1::ExperimentRequest request = Index(64);
  request.mutable_gpus()->set_gpu_count(4);
  EXPECT_EQ(Check(request, TwoNvlinkGpus()).message(),
            "gpus.gpu_count: needs 4 GPUs; this host has 2");
}

TEST(RequestValidation, RadixRefusesGpus) {
  v1::ExperimentRequest request = Radix();
  request.mutable_gpus()->add_gpu_ids(0);
  EXPECT_EQ(Check(request, TwoNvlinkGpus()).message(),
            "gpus: radix runs on the CPU; leave the GPU selection empty");
}

TEST(RequestValidation, UnsupportedWorkloadIsUnimplemented) {
  v1::ExperimentRequest request;
  request.mutable_attention();
  const absl::Status status = Check(request, TwoNvlinkGpus());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(status.message(), HasSubstr("available: radix, index"));
}

TEST(RequestValidation, LabelsDescriptionUserAndFaults) {
  v1::ExperimentRequest request = Radix();
  (*request.mutable_labels())["bad key!"] = "x";
  EXPECT_THAT(Check(request, NoGpus()).message(), HasSubstr("labels: key \"bad key!\""));

  // With two bad keys the first in sorted order is named, whatever order the map was decoded in.
  request = Radix();
  (*request.mutable_labels())["z\x1b"] = "x";
  (*request.mutable_labels())["a\x10"] = "x";
  for (int copy = 0; copy < 8; ++copy) {
    v1::ExperimentRequest decoded;
    ASSERT_TRUE(decoded.ParseFromString(request.SerializeAsString()));
    EXPECT_THAT(Check(decoded, NoGpus()).message(), HasSubstr("labels: key \"a\\020\""));
  }

  request = Radix();
  request.set_description(std::string(5000, 'd'));
  EXPECT_EQ(Check(request, NoGpus()).message(), "description: 5000 bytes; at most 4096 allowed");

  request = Radix();
  request.set_user("eve; drop table");
  EXPECT_THAT(Check(request, NoGpus()).message(), HasSubstr("user: got"));

  request = Radix();
  (*request.mutable_labels())[kFaultLabel] = "crash";
  EXPECT_THAT(Check(request, NoGpus()).message(), HasSubstr("fault injection is disabled"));
  ValidationLimits test_limits;
  test_limits.allow_test_faults = true;
  EXPECT_TRUE(Check(request, NoGpus(), test_limits).ok());
  (*request.mutable_labels())[kFaultLabel] = "explode";
  EXPECT_THAT(Check(request, NoGpus(), test_limits).message(),
              HasSubstr("must be one of crash, hang, exit, cuda-error"));
  // A fault on one rank must name a rank the experiment has (radix has one: rank 0).
  (*request.mutable_labels())[kFaultLabel] = "hang@0";
  EXPECT_TRUE(Check(request, NoGpus(), test_limits).ok());
  (*request.mutable_labels())[kFaultLabel] = "hang@1";
  EXPECT_THAT(Check(request, NoGpus(), test_limits).message(),
              HasSubstr("optionally followed by @RANK (a rank below tp_degree)"));
}

// Text another user's terminal will show: control characters are refused, naming the field,
// the character and where it is.
TEST(RequestValidation, ControlCharactersInTextAreRefused) {
  // An OSC sequence that sets the window title, then a screen clear.
  const std::string title_and_clear = "ok\x1b]0;owned\x07\x1b[2J";
  v1::ExperimentRequest request = Radix();
  (*request.mutable_labels())["team"] = title_and_clear;
  absl::Status status = Check(request, NoGpus());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("labels[team]: U+001B (escape) at byte 2 is not allowed; "
                                          "must be printable UTF-8 text"));

  request = Radix();
  request.set_description("step 1\nstep 2");
  EXPECT_THAT(Check(request, NoGpus()).message(),
              HasSubstr("description: U+000A (newline) at byte 6 is not allowed"));
  // C1 controls and bidi overrides count too: U+009B is a one-character CSI.
  request.set_description(
      "a\xc2\x9b"
      "2J");
  EXPECT_THAT(Check(request, NoGpus()).message(),
              HasSubstr("description: U+009B (control sequence introducer) at byte 1"));
  request.set_description(
      "invoice\xe2\x80\xae"
      "fdp.exe");
  EXPECT_THAT(Check(request, NoGpus()).message(),
              HasSubstr("description: U+202E (right-to-left override) at byte 7"));
  request.set_description("DEL\x7f");
  EXPECT_THAT(Check(request, NoGpus()).message(), HasSubstr("U+007F (delete) at byte 3"));
  // Printable text of any script is fine.
  request.set_description("prefix cache 90% hit, 日本語, µs, tab-free");
  EXPECT_TRUE(Check(request, NoGpus()).ok());

  request = Radix();
  (*request.mutable_labels())["a\x1b"] = "x";
  EXPECT_THAT(
      Check(request, NoGpus()).message(),
      HasSubstr("labels: key \"a\\033\" (U+001B (escape) at byte 1) is not allowed; keys are "
                "1-63 characters of [A-Za-z0-9._/-]"));

  request = Radix();
  request.set_user("a\nb");
  EXPECT_THAT(
      Check(request, NoGpus()).message(),
      HasSubstr("user: got \"a\\nb\" (U+000A (newline) at byte 1); must be 1-64 characters"));

  v1::ExperimentRequest index = Index(64);
  index.mutable_tracing()->add_extra_metrics("sm__cycles\x1b[2J");
  EXPECT_THAT(Check(index, TwoNvlinkGpus()).message(),
              HasSubstr("tracing.extra_metrics[0]: U+001B (escape) at byte 10"));
}

TEST(RequestValidation, CheckPrintableTextNamesEverything) {
  EXPECT_TRUE(CheckPrintableText("reason", "").ok());
  EXPECT_TRUE(CheckPrintableText("reason", "GPU reset, nvidia-smi -q clean").ok());
  EXPECT_EQ(CheckPrintableText("reason", "x\x07").message(),
            "reason: U+0007 (bell) at byte 1 is not allowed; must be printable UTF-8 text without "
            "control characters (U+0000-U+001F, U+007F-U+009F; newlines and tabs included) or "
            "bidirectional formatting characters (U+061C, U+200E, U+200F, U+2028, U+2029, "
            "U+202A-U+202E, U+2066-U+2069): other users' terminals show it");
  EXPECT_THAT(CheckPrintableText("reason", "bad \xff").message(),
              HasSubstr("reason: byte 0xFF (not UTF-8) at byte 4"));
}

TEST(RequestValidation, SweepAndBaselineText) {
  v1::SweepRequest sweep;
  sweep.set_description("tokens sweep");
  auto* axis = sweep.add_axes();
  axis->set_field("num_tokens");
  axis->add_values("64");
  EXPECT_TRUE(ValidateSweepRequestText(sweep).ok());
  axis->add_values("4Ki\x1b[2J");
  EXPECT_THAT(ValidateSweepRequestText(sweep).message(),
              HasSubstr("axes[0].values[1]: U+001B (escape) at byte 3"));
  sweep.set_description("\x1b]0;owned\x07");
  EXPECT_THAT(ValidateSweepRequestText(sweep).message(), HasSubstr("description: U+001B"));

  v1::SaveBaselineRequest baseline;
  baseline.set_name("main-nov");
  baseline.set_description("before the change");
  EXPECT_TRUE(ValidateBaselineText(baseline).ok());
  baseline.set_description("\xe2\x81\xa6hidden");
  EXPECT_THAT(ValidateBaselineText(baseline).message(),
              HasSubstr("description: U+2066 (left-to-right isolate) at byte 0"));
}

TEST(RequestValidation, TimeoutAndMeasurementBounds) {
  v1::ExperimentRequest request = Radix();
  *request.mutable_timeout() = TimeUtil::SecondsToDuration(100 * 3600);
  EXPECT_EQ(Check(request, NoGpus()).message(),
            "timeout (seconds): got 360000; must be in [1, 86400]");

  request = Index(64);
  request.mutable_measurement()->set_min_iterations(50);
  request.mutable_measurement()->set_max_iterations(10);
  EXPECT_EQ(Check(request, TwoNvlinkGpus()).message(),
            "measurement.max_iterations: got 10; must be in [50, 1000000]");

  request = Index(64);
  request.mutable_measurement()->set_eager_launches_per_sample(5000);
  EXPECT_EQ(Check(request, TwoNvlinkGpus()).message(),
            "measurement.eager_launches_per_sample: got 5000; must be in [0, 1000]");
  request.mutable_measurement()->set_eager_launches_per_sample(10);
  request.mutable_measurement()->set_graph_launches_per_sample(20);
  EXPECT_THAT(Check(request, TwoNvlinkGpus()).message(),
              HasSubstr("measurement.eager_launches_per_sample: got 10 with "
                        "graph_launches_per_sample 20"));
  request.mutable_measurement()->set_graph_launches_per_sample(0);
  EXPECT_TRUE(Check(request, TwoNvlinkGpus()).ok());
}

TEST(RequestValidation, MeasurementOptionsAreCheckedForCpuWorkloadsToo) {
  v1::ExperimentRequest request = Radix();
  request.mutable_measurement()->set_warmup_iterations(-1);
  EXPECT_EQ(Check(request, NoGpus()).message(),
            "measurement.warmup_iterations: got -1; must be in [0, 100000]");
  request = Radix();
  request.mutable_measurement()->set_min_iterations(-4);
  EXPECT_EQ(Check(request, NoGpus()).message(),
            "measurement.min_iterations: got -4; must be in [1, 1000000]");
  request = Radix();
  request.mutable_measurement()->set_noise_target(2.0);
  EXPECT_EQ(Check(request, NoGpus()).message(),
            "measurement.noise_target: got 2; must be in [0, 1)");
  request = Radix();
  *request.mutable_measurement()->mutable_time_budget() = TimeUtil::SecondsToDuration(3600);
  EXPECT_EQ(Check(request, NoGpus()).message(),
            "measurement.time_budget (ms): got 3600000; must be in [1, 600000]");
  request = Radix();
  *request.mutable_measurement()->mutable_min_time() = TimeUtil::SecondsToDuration(3600);
  EXPECT_EQ(Check(request, NoGpus()).message(),
            "measurement.min_time (ms): got 3600000; must be in [0, 600000]");
  request = Radix();
  request.mutable_measurement()->mutable_min_time()->set_nanos(-1);
  EXPECT_THAT(Check(request, NoGpus()).message(),
              HasSubstr("measurement.min_time: got a Duration of seconds 0, nanos -1"));
  // Options that only mean something on a GPU are refused, not ignored.
  request = Radix();
  request.mutable_measurement()->set_l2_mode(v1::MeasurementOptions::L2_MODE_COLD);
  EXPECT_EQ(Check(request, NoGpus()).message(),
            "measurement.l2_mode: radix runs on the CPU, where it means nothing; leave it unset");
  // Options left at zero (unset) stay valid: a CPU workload gets no defaults.
  request = Radix();
  request.mutable_measurement()->set_warmup_iterations(0);
  EXPECT_TRUE(Check(request, NoGpus()).ok()) << Check(request, NoGpus());
  request.mutable_measurement()->set_warmup_iterations(5);
  request.mutable_measurement()->set_max_iterations(100);
  EXPECT_TRUE(Check(request, NoGpus()).ok()) << Check(request, NoGpus());
}

TEST(RequestValidation, InvalidDurationsAreRefused) {
  struct Case {
    int64_t seconds;
    int32_t nanos;
  };
  for (const Case& bad :
       {Case{0, -1}, Case{5, -1}, Case{-5, 0}, Case{-1, -1}, Case{1, 1'000'000'000},
        Case{315'576'000'001, 0}, Case{std::numeric_limits<int64_t>::max(), 0}}) {
    v1::ExperimentRequest request = Radix();
    request.mutable_timeout()->set_seconds(bad.seconds);
    request.mutable_timeout()->set_nanos(bad.nanos);
    EXPECT_THAT(Check(request, NoGpus()).message(),
                HasSubstr(absl::StrFormat("timeout: got a Duration of seconds %d, nanos %d; must "
                                          "not be negative, with seconds in [0, 315576000000] "
                                          "and nanos in [0, 999999999]",
                                          bad.seconds, bad.nanos)));
    request = Index(64);
    request.mutable_measurement()->mutable_time_budget()->set_seconds(bad.seconds);
    request.mutable_measurement()->mutable_time_budget()->set_nanos(bad.nanos);
    EXPECT_THAT(Check(request, TwoNvlinkGpus()).message(),
                HasSubstr("measurement.time_budget: got a Duration of seconds"));
  }
}

TEST(RequestValidation, UnknownEnumValuesNameTheFieldAndTheNames) {
  v1::ExperimentRequest request = Index(64);
  request.mutable_measurement()->set_l2_mode(static_cast<v1::MeasurementOptions::L2Mode>(7));
  EXPECT_EQ(Check(request, TwoNvlinkGpus()).message(),
            "measurement.l2_mode: got 7, which gpuprof.v1.MeasurementOptions.L2Mode does not "
            "name; must be one of L2_MODE_UNSPECIFIED, L2_MODE_HOT, L2_MODE_COLD");
  request = Radix();
  request.mutable_tracing()->set_level(static_cast<v1::TracingOptions::Level>(-1));
  EXPECT_THAT(Check(request, NoGpus()).message(), HasSubstr("tracing.level: got -1"));
  request = Index(64);
  request.mutable_gpus()->set_placement(static_cast<v1::GpuSelection::Placement>(99));
  EXPECT_THAT(Check(request, TwoNvlinkGpus()).message(),
              HasSubstr("gpus.placement: got 99, which gpuprof.v1.GpuSelection.Placement"));
}

TEST(RequestValidation, CheckWellFormedWalksRepeatedAndNestedFields) {
  v1::ListGpusResponse nested;
  EXPECT_TRUE(CheckWellFormed(nested).ok());
  v1::SweepRequest sweep;
  sweep.mutable_base()->mutable_measurement()->mutable_time_budget()->set_nanos(-5);
  EXPECT_THAT(CheckWellFormed(sweep).message(),
              HasSubstr("base.measurement.time_budget: got a Duration of seconds 0, nanos -5"));
}

TEST(RequestValidation, BoundedExcerptCutsAndEscapes) {
  EXPECT_EQ(BoundedExcerpt("exp-000042"), "\"exp-000042\" (10 bytes)");
  EXPECT_EQ(BoundedExcerpt("a\x1b[2J\xff"), "\"a\\x1b[2J\\xff\" (6 bytes)");
  const std::string cut = BoundedExcerpt(std::string(3 << 20, 'x'));
  EXPECT_EQ(cut, absl::StrCat("\"", std::string(64, 'x'), "\"... (3145728 bytes)"));
}

TEST(RequestValidation, StrictPlacementThatCanNeverBeMetIsRefused) {
  v1::ListGpusResponse inventory = TwoNvlinkGpus();
  inventory.mutable_gpus(1)->set_numa_node(1);
  v1::ExperimentRequest request = Index(64);
  request.mutable_gpus()->set_gpu_count(2);
  request.mutable_gpus()->set_placement(v1::GpuSelection::PLACEMENT_SAME_NUMA);
  const absl::Status status = Check(request, inventory);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("no set of 2 GPUs"));
}

TEST(RequestValidation, CollectiveSpansItsGpus) {
  v1::ExperimentRequest request;
  request.mutable_collective();
  request.mutable_gpus()->set_gpu_count(2);
  ApplyRequestDefaults({}, TwoNvlinkGpus(), request);
  EXPECT_EQ(request.tp_degree(), 2);
  EXPECT_EQ(workloads::RequiredGpuCount(request), 2);
  // Every rank runs the same number of collectives: a fixed sample count, no early stop.
  EXPECT_EQ(request.measurement().min_iterations(), request.measurement().max_iterations());
  EXPECT_EQ(TimeUtil::DurationToSeconds(request.measurement().time_budget()), 600);
  EXPECT_EQ(request.collective().min_bytes(), request.collective().max_bytes());
}

TEST(RequestValidation, OneProcessWorkloadsTakeOneRank) {
  v1::ExperimentRequest request;
  request.mutable_store();
  request.mutable_gpus()->add_gpu_ids(0);
  request.mutable_gpus()->add_gpu_ids(1);
  ApplyRequestDefaults({}, TwoNvlinkGpus(), request);
  EXPECT_EQ(request.tp_degree(), 1);
  EXPECT_TRUE(Check(request, TwoNvlinkGpus()).ok());
  request.set_tp_degree(2);
  EXPECT_EQ(Check(request, TwoNvlinkGpus()).message(),
            "tp_degree: got 2; store runs on one rank in this build (tensor parallelism: "
            "index, attention, collective)");
}

TEST(RequestValidation, IndexTakesOneRankPerGpu) {
  v1::ExperimentRequest request = Index(64);
  request.mutable_gpus()->add_gpu_ids(0);
  request.mutable_gpus()->add_gpu_ids(1);
  request.set_tp_degree(2);
  EXPECT_TRUE(Check(request, TwoNvlinkGpus()).ok());
  // The ranks shard the vocabulary themselves.
  request.mutable_index()->mutable_vocab_range()->set_end(100);
  EXPECT_EQ(Check(request, TwoNvlinkGpus()).message(),
            "index.vocab_range: set by the ranks when tp_degree > 1 (each rank takes its shard); "
            "leave it unset");
}

TEST(RequestValidation, AttentionSplitsItsHeadsAcrossRanks) {
  v1::ListGpusResponse inventory = TwoNvlinkGpus();
  inventory.add_supported_workloads("attention");
  v1::ExperimentRequest request;
  request.mutable_attention()->set_num_qo_heads(6);
  request.mutable_attention()->set_num_kv_heads(3);
  request.mutable_gpus()->add_gpu_ids(0);
  request.mutable_gpus()->add_gpu_ids(1);
  request.set_tp_degree(2);
  EXPECT_EQ(Check(request, inventory).message(),
            "attention.num_kv_heads: got 3; must divide by tp_degree (2): each rank takes a "
            "share of the KV heads");
  request.mutable_attention()->set_num_kv_heads(2);
  request.mutable_attention()->set_num_qo_heads(8);
  EXPECT_TRUE(Check(request, inventory).ok());
}

TEST(RequestValidation, CollectiveSizesAndTypesTheRanksCanRun) {
  v1::ListGpusResponse inventory = TwoNvlinkGpus();
  inventory.add_supported_workloads("collective");
  inventory.mutable_host()->set_nccl_version("2.21.5");
  v1::ExperimentRequest request;
  request.mutable_collective()->set_op(v1::COLLECTIVE_OP_ALL_GATHER);
  request.mutable_collective()->set_bytes_per_rank(1001);
  request.mutable_gpus()->set_gpu_count(2);
  EXPECT_EQ(Check(request, inventory).message(),
            "collective.bytes_per_rank: got 1001; all-gather splits its buffer into one chunk "
            "per rank, so it must be a multiple of 2 ranks x 2-byte elements");
  request.mutable_collective()->set_bytes_per_rank(1000);
  EXPECT_TRUE(Check(request, inventory).ok());
  request.mutable_collective()->set_dtype(v1::DATA_TYPE_FP8_E4M3);
  EXPECT_EQ(Check(request, inventory).message(),
            "collective.dtype: got fp8-e4m3; this host's NCCL 2.21.5 has no fp8 (NCCL 2.24 or "
            "later does)");
  inventory.mutable_host()->set_nccl_version("2.28.3");
  EXPECT_TRUE(Check(request, inventory).ok());

  // Symmetric windows: whole 16-byte chunks per rank, out of place.
  request.mutable_collective()->set_dtype(v1::DATA_TYPE_BF16);
  request.mutable_collective()->set_buffer_mode(v1::BUFFER_MODE_SYMMETRIC);
  request.mutable_collective()->set_min_bytes(8);
  request.mutable_collective()->set_max_bytes(1 << 20);
  EXPECT_EQ(Check(request, inventory).message(),
            "collective.min_bytes: got 8 (step factor 2); all-gather over symmetric windows needs "
            "per-rank chunks that are multiples of 16 bytes: min_bytes a multiple of 32 and a "
            "whole step factor");
  request.mutable_collective()->set_min_bytes(1024);
  EXPECT_TRUE(Check(request, inventory).ok());
  request.mutable_collective()->set_in_place(true);
  EXPECT_THAT(
      Check(request, inventory).message(),
      HasSubstr("collective.in_place: all-gather over symmetric windows runs out of place"));
}

TEST(RequestValidation, EagerCollectivesTakeNoGraph) {
  v1::ExperimentRequest request;
  request.mutable_collective()->set_eager(true);
  request.mutable_gpus()->set_gpu_count(2);
  ApplyRequestDefaults({}, TwoNvlinkGpus(), request);
  EXPECT_EQ(request.measurement().graph_launches_per_sample(), 0);
  // A batch of launches per sample, as NCCL driven directly runs them.
  EXPECT_EQ(request.measurement().eager_launches_per_sample(), 20);
  request.mutable_collective()->set_eager(false);
  request.mutable_measurement()->clear_graph_launches_per_sample();
  ApplyRequestDefaults({}, TwoNvlinkGpus(), request);
  EXPECT_EQ(request.measurement().graph_launches_per_sample(), 20);
}

TEST(RequestValidation, RankPerGpuWorkloadsNeedTpEqualToTheGpuSet) {
  v1::ExperimentRequest request;
  request.mutable_collective();
  request.mutable_gpus()->set_gpu_count(2);
  request.set_tp_degree(1);
  ApplyRequestDefaults({}, TwoNvlinkGpus(), request);
  EXPECT_EQ(Check(request, TwoNvlinkGpus()).message(),
            "tp_degree: got 1 with 2 GPUs selected; collective runs one rank per GPU, so they "
            "must be equal");
}

// Admission's one-lookup path gives the request and the verdict of the two separate steps.
TEST(RequestValidation, DefaultsAndValidationInOneStepMatchTheTwoSteps) {
  v1::ExperimentRequest no_workload;
  no_workload.set_user("alice");
  v1::ExperimentRequest radix_on_gpus = Radix();
  radix_on_gpus.mutable_gpus()->set_gpu_count(1);
  v1::ExperimentRequest collective;
  collective.mutable_collective();
  collective.mutable_gpus()->set_gpu_count(2);
  int refused = 0;
  for (v1::ExperimentRequest request :
       {Radix(), Index(64), Index(-5), no_workload, radix_on_gpus, collective}) {
    if (request.user().empty()) request.set_user("alice");
    v1::ExperimentRequest two_steps = request;
    ApplyRequestDefaults({}, TwoNvlinkGpus(), two_steps);
    const absl::Status expected = ValidateExperimentRequest(two_steps, TwoNvlinkGpus(), {});
    const absl::Status got = ApplyDefaultsAndValidate({}, TwoNvlinkGpus(), request);
    EXPECT_EQ(got, expected);
    EXPECT_EQ(request.DebugString(), two_steps.DebugString());
    if (!got.ok()) ++refused;
  }
  // A negative size, no workload, GPUs for a CPU workload, a workload this host lacks.
  EXPECT_EQ(refused, 4);
}

}  // namespace
}  // namespace gpuprof::daemon
