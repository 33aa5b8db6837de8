// Submitted attention decode kernels end to end on a GPU machine, through the real daemon,
// worker and gRPC API: the worked example (FINISHED, every check passed on fresh inputs and
// again after timing, its resources and SASS, a bandwidth headline counted as our decode's),
// also on ragged lengths, fp16, page size 1 and other group sizes; a wrong one (refused before
// timing, naming the first element off as "sequence S, head H, element E: got ..., expected
// ..., tolerance ..."); one writing past o (caught by the guard bytes); one that never returns
// (TIMED_OUT, and the next experiment on that GPU FINISHED); one that does not compile (the
// compiler's "file.cu(N): error"); prefill refused; and the sanitize mode: the example clean
// under memcheck, and a kernel reading before the K cache FAILED with memcheck's count and
// first error, its report kept. Tagged gpu: CI skips it.
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "google/protobuf/util/time_util.h"
#include "grpcpp/grpcpp.h"
#include "tests/testing/custom_kernel_runs.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::google::protobuf::util::TimeUtil;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

v1::CustomKernel Kernel(const std::string& path, const std::string& name, int block_threads = 0,
                        int items_per_block = 0) {
  v1::CustomKernel kernel = KernelFromFile(path, name, block_threads, items_per_block);
  EXPECT_FALSE(kernel.source().empty()) << path;
  return kernel;
}

v1::CustomKernel Example(int block_threads = 256, int items_per_block = 1) {
  return Kernel("examples/custom_kernels/decode_paged.cu", "decode_paged", block_threads,
                items_per_block);
}

// Small enough for the plain broken kernels and the exact reference to be quick.
v1::ExperimentRequest DecodeRequest(v1::CustomKernel kernel) {
  v1::ExperimentRequest request;
  v1::AttentionSpec& spec = *request.mutable_attention();
  spec.set_phase(v1::ATTENTION_PHASE_DECODE);
  spec.set_batch_size(8);
  spec.set_kv_len(1000);
  spec.set_num_qo_heads(32);
  spec.set_num_kv_heads(8);
  spec.set_head_dim(128);
  spec.set_page_size(16);
  spec.set_dtype(v1::DATA_TYPE_BF16);
  *request.mutable_custom_kernel() = std::move(kernel);
  return request;
}

class CustomKernelDecodeGpuE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<DaemonProcess>(MakeTempDir("gpuprofd-custom-decode"));
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started << daemon_->Log();
  }

  // Submits and follows the experiment to its end; returns the stored experiment, or the
  // refusal's status in `refused` when admission refused it.
  v1::Experiment RunToEnd(const v1::ExperimentRequest& request, absl::Status* refused = nullptr) {
    absl::StatusOr<v1::Experiment> experiment = SubmitAndWait(*daemon_, request);
    if (!experiment.ok() && refused != nullptr) {
      *refused = experiment.status();
      return {};
    }
    EXPECT_TRUE(experiment.ok()) << experiment.status() << daemon_->Log();
    return experiment.value_or(v1::Experiment());
  }

  void ExpectFinishedAndChecked(const v1::Experiment& experiment, int checks) {
    ASSERT_EQ(experiment.state(), v1::FINISHED) << experiment.reason();
    const v1::ExperimentResult& result = experiment.result();
    EXPECT_TRUE(result.verification().passed()) << result.verification().message();
    ASSERT_EQ(result.custom_kernel().checks_size(), checks);
    for (const v1::Verification& check : result.custom_kernel().checks()) {
      EXPECT_TRUE(check.passed()) << check.message();
    }
    EXPECT_EQ(result.custom_kernel().guard_bytes_overwritten(), 0);
    EXPECT_EQ(result.kernel_config().at("contract"), "decode");
  }

  // A refused kernel fails its experiment (it has no figure to rank), its result kept.
  void ExpectRefusedBeforeTiming(const v1::Experiment& experiment, const std::string& message) {
    ASSERT_EQ(experiment.state(), v1::FAILED) << experiment.reason();
    EXPECT_THAT(experiment.reason(), HasSubstr("the custom kernel was refused: "));
    EXPECT_THAT(experiment.reason(), HasSubstr(message));
    const v1::ExperimentResult& result = experiment.result();
    EXPECT_TRUE(result.verification().checked());
    EXPECT_FALSE(result.verification().passed());
    EXPECT_THAT(result.verification().message(), HasSubstr(message));
    EXPECT_EQ(result.custom_kernel().checks_size(), 1);
    EXPECT_EQ(result.measurement().kernel_time().samples(), 0);
  }

  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(CustomKernelDecodeGpuE2eTest, ExampleIsCheckedTimedAndDisassembled) {
  v1::ExperimentRequest request = DecodeRequest(Example());
  request.mutable_attention()->set_batch_size(32);
  request.mutable_attention()->set_kv_len(4096);
  const v1::Experiment experiment = RunToEnd(request);
  ExpectFinishedAndChecked(experiment, 4);
  const v1::ExperimentResult& result = experiment.result();
  const v1::CustomKernelResult& kernel = result.custom_kernel();
  EXPECT_EQ(kernel.blocks(), 32 * 8);  // one block per (sequence, KV head)
  EXPECT_EQ(kernel.block_threads(), 256);
  EXPECT_GT(kernel.registers_per_thread(), 0);
  EXPECT_GT(kernel.static_shared_bytes(), 0);
  EXPECT_GT(kernel.blocks_per_sm(), 0);
  EXPECT_FALSE(kernel.occupancy_limiter().empty());
  EXPECT_GT(result.sass_size(), 0);
  // Counted as our decode counts: Q and O once, K and V once per KV head.
  const double bytes = 2.0 * 32 * 32 * 128 * 2 + 2.0 * 32 * 4096 * 8 * 128 * 2;
  EXPECT_NEAR(
      result.measurement().bandwidth_gbps() * result.measurement().kernel_time().median_us(),
      bytes / 1e3, bytes / 1e3 * 1e-2);
}

TEST_F(CustomKernelDecodeGpuE2eTest, ExampleIsRightAcrossShapes) {
  // Ragged lengths (one shorter than a page), fp16 with 64-wide heads on pages of one token,
  // group sizes 1 and 8 with 256-wide heads, several items per block.
  v1::ExperimentRequest ragged = DecodeRequest(Example(128, 3));
  ragged.mutable_attention()->set_batch_size(5);
  for (int kv_len : {1, 15, 17, 1000, 333}) {
    ragged.mutable_attention()->add_q_lens(1);
    ragged.mutable_attention()->add_kv_lens(kv_len);
  }
  ragged.mutable_attention()->clear_kv_len();
  v1::ExperimentRequest fp16 = DecodeRequest(Example(64));
  fp16.mutable_attention()->set_dtype(v1::DATA_TYPE_FP16);
  fp16.mutable_attention()->set_head_dim(64);
  fp16.mutable_attention()->set_page_size(1);
  v1::ExperimentRequest no_grouping = DecodeRequest(Example());
  no_grouping.mutable_attention()->set_num_kv_heads(32);
  no_grouping.mutable_attention()->set_head_dim(256);
  v1::ExperimentRequest wide_group = DecodeRequest(Example(512));
  wide_group.mutable_attention()->set_num_kv_heads(4);
  wide_group.mutable_attention()->set_head_dim(256);
  wide_group.mutable_attention()->set_page_size(64);
  for (v1::ExperimentRequest* request : {&ragged, &fp16, &no_grouping, &wide_group}) {
    request->mutable_custom_kernel()->set_mode(v1::CustomKernel::MODE_TEST);
    ExpectFinishedAndChecked(RunToEnd(*request), 3);
  }
}

TEST_F(CustomKernelDecodeGpuE2eTest, WrongKernelIsRefusedNamingTheFirstElementOff) {
  const v1::Experiment experiment =
      RunToEnd(DecodeRequest(Kernel("tests/e2e/custom_kernels/decode_wrong.cu", "decode_wrong")));
  ExpectRefusedBeforeTiming(experiment, "first at sequence ");
  EXPECT_THAT(experiment.result().verification().message(),
              MatchesRegex(".*first at sequence [0-9]+, head [0-9]+, element [0-9]+: got "
                           "[-0-9.e]+, expected [-0-9.e]+, tolerance [0-9.e-]+.*"));
}

TEST_F(CustomKernelDecodeGpuE2eTest, WriteAfterTheOutputIsCaughtByTheGuards) {
  const v1::Experiment experiment = RunToEnd(DecodeRequest(
      Kernel("tests/e2e/custom_kernels/decode_out_of_bounds.cu", "decode_out_of_bounds")));
  ExpectRefusedBeforeTiming(experiment, "out-of-bounds write: 2 guard bytes after o changed");
  EXPECT_EQ(experiment.result().custom_kernel().guard_bytes_overwritten(), 2);
}

TEST_F(CustomKernelDecodeGpuE2eTest, KernelThatNeverReturnsTimesOutAndFreesTheGpu) {
  v1::ExperimentRequest spinning = DecodeRequest(
      Kernel("tests/e2e/custom_kernels/decode_never_returns.cu", "decode_never_returns"));
  *spinning.mutable_timeout() = TimeUtil::SecondsToDuration(10);
  const v1::Experiment timed_out = RunToEnd(spinning);
  ASSERT_EQ(timed_out.state(), v1::TIMED_OUT) << timed_out.reason();
  ASSERT_EQ(timed_out.gpu_ids_size(), 1);
  v1::ExperimentRequest next = DecodeRequest(Example());
  *next.mutable_gpus()->mutable_gpu_ids() = timed_out.gpu_ids();
  ExpectFinishedAndChecked(RunToEnd(next), 4);
}

TEST_F(CustomKernelDecodeGpuE2eTest, KernelThatDoesNotCompileFailsWithTheCompilersMessage) {
  const v1::Experiment experiment = RunToEnd(DecodeRequest(
      Kernel("tests/e2e/custom_kernels/decode_does_not_compile.cu", "decode_does_not_compile")));
  EXPECT_EQ(experiment.state(), v1::FAILED);
  EXPECT_THAT(experiment.reason(), HasSubstr("decode_does_not_compile.cu(5): error"));
  EXPECT_THAT(experiment.reason(), HasSubstr("no member \"kv_len\""));
}

TEST_F(CustomKernelDecodeGpuE2eTest, PrefillTakesNoCustomKernel) {
  v1::ExperimentRequest prefill = DecodeRequest(Example());
  prefill.mutable_attention()->set_phase(v1::ATTENTION_PHASE_PREFILL);
  absl::Status refused;
  const v1::Experiment experiment = RunToEnd(prefill, &refused);
  if (experiment.id().empty()) {
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(refused.message(), HasSubstr("prefill"));
  } else {
    EXPECT_EQ(experiment.state(), v1::FAILED);
    EXPECT_THAT(experiment.reason(), HasSubstr("decode only"));
  }
}

TEST_F(CustomKernelDecodeGpuE2eTest, SanitizeFindsNothingInTheExample) {
  v1::CustomKernel kernel = Example();
  kernel.set_mode(v1::CustomKernel::MODE_SANITIZE);
  const v1::Experiment experiment = RunToEnd(DecodeRequest(std::move(kernel)));
  ASSERT_EQ(experiment.state(), v1::FINISHED) << experiment.reason();
  const v1::ExperimentResult& result = experiment.result();
  EXPECT_EQ(result.custom_kernel().sanitizer_errors(), 0);
  EXPECT_THAT(result.custom_kernel().sanitizer_report(), HasSubstr("ERROR SUMMARY: 0 errors"));
  EXPECT_TRUE(result.verification().passed()) << result.verification().message();
  EXPECT_THAT(result.verification().message(),
              HasSubstr("compute-sanitizer memcheck found no errors"));
  EXPECT_EQ(result.measurement().kernel_time().samples(), 0);
}

TEST_F(CustomKernelDecodeGpuE2eTest, SanitizeFailsAReadBeforeTheCacheWithMemchecksReport) {
  v1::CustomKernel kernel =
      Kernel("tests/e2e/custom_kernels/decode_reads_before_cache.cu", "decode_reads_before_cache");
  kernel.set_mode(v1::CustomKernel::MODE_SANITIZE);
  kernel.set_sanitizer_tool("memcheck");
  const v1::Experiment experiment = RunToEnd(DecodeRequest(std::move(kernel)));
  EXPECT_EQ(experiment.state(), v1::FAILED);
  EXPECT_THAT(experiment.reason(), HasSubstr("compute-sanitizer memcheck found "));
  EXPECT_THAT(experiment.reason(), HasSubstr("the first: Invalid __global__ read"));
  const v1::CustomKernelResult& result = experiment.result().custom_kernel();
  EXPECT_GT(result.sanitizer_errors(), 0);
  EXPECT_THAT(result.sanitizer_report(), HasSubstr("decode_reads_before_cache.cu:"));
}

}  // namespace
}  // namespace gpuprof::testing
