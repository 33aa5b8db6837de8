// Submitted kernels end to end on a GPU machine, through the real daemon, worker and gRPC API:
// for the index and store contracts, a correct kernel (FINISHED, every check passed, its
// resources, occupancy and SASS in the result), a wrong one (verification FAILED naming the
// first mismatching element, nothing timed), one writing out of bounds (caught by the guard
// bytes), one that never returns (TIMED_OUT at its 10 s timeout, and the next experiment on
// the same GPU FINISHED), and one that does not compile (FAILED with the compiler's
// "file.cu(N): error"). Tagged gpu: CI skips it.
#include <iostream>
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

v1::CustomKernel Kernel(const std::string& path, const std::string& name, int block_threads = 0,
                        int items_per_block = 0) {
  v1::CustomKernel kernel = KernelFromFile(path, name, block_threads, items_per_block);
  EXPECT_FALSE(kernel.source().empty()) << path;
  return kernel;
}

v1::ExperimentRequest IndexRequest(v1::CustomKernel kernel) {
  v1::ExperimentRequest request;
  request.mutable_index()->set_num_tokens(4096);
  request.mutable_index()->set_hidden_dim(4096);
  request.mutable_index()->set_vocab_size(32000);
  request.mutable_index()->set_dtype(v1::DATA_TYPE_BF16);
  *request.mutable_custom_kernel() = std::move(kernel);
  return request;
}

v1::ExperimentRequest StoreRequest(v1::CustomKernel kernel) {
  v1::ExperimentRequest request;
  request.mutable_store()->set_num_tokens(4096);
  request.mutable_store()->set_num_kv_heads(8);
  request.mutable_store()->set_head_dim(128);
  request.mutable_store()->set_dtype(v1::DATA_TYPE_BF16);
  request.mutable_store()->set_cache_slots(16384);
  request.mutable_store()->set_page_size(16);
  request.mutable_store()->set_slot_pattern(v1::SLOT_PATTERN_RANDOM);
  *request.mutable_custom_kernel() = std::move(kernel);
  return request;
}

class CustomKernelGpuE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<DaemonProcess>(MakeTempDir("gpuprofd-custom-kernels"));
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started << daemon_->Log();
  }

  // Submits and follows the experiment to its end; returns the stored experiment.
  v1::Experiment RunToEnd(const v1::ExperimentRequest& request) {
    absl::StatusOr<v1::Experiment> experiment = SubmitAndWait(*daemon_, request);
    EXPECT_TRUE(experiment.ok()) << experiment.status() << daemon_->Log();
    return experiment.value_or(v1::Experiment());
  }

  void ExpectFinishedCheckedAndDescribed(const v1::Experiment& experiment) {
    ASSERT_EQ(experiment.state(), v1::FINISHED) << experiment.reason();
    const v1::ExperimentResult& result = experiment.result();
    EXPECT_TRUE(result.verification().passed()) << result.verification().message();
    const v1::CustomKernelResult& kernel = result.custom_kernel();
    ASSERT_EQ(kernel.checks_size(), 4);
    for (const v1::Verification& check : kernel.checks()) {
      EXPECT_TRUE(check.passed()) << check.message();
    }
    EXPECT_EQ(kernel.guard_bytes_overwritten(), 0);
    EXPECT_EQ(kernel.source_sha256().size(), 64u);
    EXPECT_GT(kernel.registers_per_thread(), 0);
    EXPECT_GT(kernel.blocks_per_sm(), 0);
    EXPECT_GT(kernel.theoretical_occupancy(), 0);
    EXPECT_FALSE(kernel.occupancy_limiter().empty());
    EXPECT_GT(result.sass_size(), 0);
    EXPECT_GT(result.measurement().bandwidth_gbps(), 0);
  }

  // A refused kernel fails its experiment (it has no figure to rank), its result kept.
  void ExpectRefusedBeforeTiming(const v1::Experiment& experiment, const std::string& message) {
    ASSERT_EQ(experiment.state(), v1::FAILED) << experiment.reason();
    EXPECT_THAT(experiment.reason(), HasSubstr("the custom kernel was refused: "));
    EXPECT_THAT(experiment.reason(), HasSubstr(message));
    const v1::ExperimentResult& result = experiment.result();
    ASSERT_TRUE(result.verification().checked());
    EXPECT_FALSE(result.verification().passed());
    EXPECT_THAT(result.verification().message(), HasSubstr(message));
    EXPECT_EQ(result.custom_kernel().checks_size(), 1);
    EXPECT_EQ(result.measurement().kernel_time().samples(), 0);
  }

  // The kernel spins until the experiment's 10 s timeout kills its worker; the GPU it held
  // then runs `next` to the end.
  void ExpectTimedOutThenNextFinishes(v1::ExperimentRequest spinning,
                                      v1::ExperimentRequest next) {
    *spinning.mutable_timeout() = TimeUtil::SecondsToDuration(10);
    const v1::Experiment timed_out = RunToEnd(spinning);
    ASSERT_EQ(timed_out.state(), v1::TIMED_OUT)
        << timed_out.reason() << timed_out.result().verification().message();
    ASSERT_EQ(timed_out.gpu_ids_size(), 1);
    *next.mutable_gpus()->mutable_gpu_ids() = timed_out.gpu_ids();
    const v1::Experiment after = RunToEnd(next);
    EXPECT_EQ(after.state(), v1::FINISHED) << after.reason();
    EXPECT_TRUE(after.result().verification().passed());
  }

  void ExpectCompileError(const v1::Experiment& experiment, const std::string& where) {
    EXPECT_EQ(experiment.state(), v1::FAILED);
    EXPECT_THAT(experiment.reason(), HasSubstr(where));
  }

  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(CustomKernelGpuE2eTest, IndexCorrectKernelIsCheckedTimedProfiledAndDisassembled) {
  v1::CustomKernel kernel =
      Kernel("examples/custom_kernels/index_gather.cu", "index_gather", 256, 8);
  kernel.set_mode(v1::CustomKernel::MODE_PROFILE);
  const v1::Experiment experiment = RunToEnd(IndexRequest(std::move(kernel)));
  ExpectFinishedCheckedAndDescribed(experiment);
  // PC samples on the SASS lines, or the reason they are not there.
  int64_t samples = 0;
  for (const v1::SassLine& line : experiment.result().sass()) {
    samples += line.samples();
    if (line.samples() > 0) {
      EXPECT_FALSE(line.top_stall().empty()) << line.text();
    }
  }
  bool noted = false;
  for (const std::string& note : experiment.result().not_collected()) {
    noted = noted || note.find("PC-sampling stalls per SASS line") == 0;
  }
  EXPECT_TRUE(samples > 0 || noted);
  RecordProperty("sass_pc_samples", static_cast<int>(samples));
  std::cout << "PC samples on SASS lines: " << samples << "\n";
  for (const std::string& note : experiment.result().not_collected()) {
    std::cout << "not collected: " << note << "\n";
  }
}

TEST_F(CustomKernelGpuE2eTest, StoreCorrectKernelIsCheckedTimedAndDisassembled) {
  ExpectFinishedCheckedAndDescribed(RunToEnd(
      StoreRequest(Kernel("examples/custom_kernels/store_scatter.cu", "store_scatter", 256, 8))));
}

TEST_F(CustomKernelGpuE2eTest, WrongKernelsAreRefusedNamingTheFirstMismatch) {
  ExpectRefusedBeforeTiming(
      RunToEnd(IndexRequest(Kernel("tests/e2e/custom_kernels/index_wrong.cu", "index_wrong"))),
      "first at token 17, element 5: got 0x");
  ExpectRefusedBeforeTiming(
      RunToEnd(StoreRequest(Kernel("tests/e2e/custom_kernels/store_wrong.cu", "store_wrong"))),
      "cache slot");
}

TEST_F(CustomKernelGpuE2eTest, OutOfBoundsWritesAreCaughtByTheGuards) {
  const v1::Experiment index = RunToEnd(IndexRequest(
      Kernel("tests/e2e/custom_kernels/index_out_of_bounds.cu", "index_out_of_bounds")));
  ExpectRefusedBeforeTiming(index, "out-of-bounds write: 16 guard bytes after the output");
  EXPECT_EQ(index.result().custom_kernel().guard_bytes_overwritten(), 16);
  ExpectRefusedBeforeTiming(RunToEnd(StoreRequest(Kernel(
                                "tests/e2e/custom_kernels/store_out_of_bounds.cu",
                                "store_out_of_bounds"))),
                            "out-of-bounds write: 8 guard bytes before the V cache");
}

TEST_F(CustomKernelGpuE2eTest, KernelsThatNeverReturnTimeOutAndFreeTheGpu) {
  ExpectTimedOutThenNextFinishes(
      IndexRequest(Kernel("tests/e2e/custom_kernels/index_never_returns.cu", "index_never_returns")),
      IndexRequest(Kernel("examples/custom_kernels/index_gather.cu", "index_gather", 256, 8)));
  ExpectTimedOutThenNextFinishes(
      StoreRequest(Kernel("tests/e2e/custom_kernels/store_never_returns.cu", "store_never_returns")),
      StoreRequest(Kernel("examples/custom_kernels/store_scatter.cu", "store_scatter", 256, 8)));
}

// The worker reports the CUDA error, unless the daemon's Xid watcher sees the fault first and
// ends the experiment naming the Xid: either way FAILED with the fault named, and the GPU runs
// the next experiment.
TEST_F(CustomKernelGpuE2eTest, AFaultingKernelFailsNamingTheFaultAndTheGpuGoesOn) {
  const v1::Experiment faulted = RunToEnd(IndexRequest(
      Kernel("tests/e2e/custom_kernels/index_illegal_address.cu", "index_illegal_address")));
  ASSERT_EQ(faulted.state(), v1::FAILED) << faulted.reason();
  EXPECT_THAT(faulted.reason(), ::testing::AnyOf(HasSubstr("cudaErrorIllegalAddress"),
                                                 HasSubstr("Xid 43"), HasSubstr("Xid 13"),
                                                 HasSubstr("Xid 31")));
  std::cout << "fault reason: " << faulted.reason() << "\n";
  v1::ExperimentRequest next =
      IndexRequest(Kernel("examples/custom_kernels/index_gather.cu", "index_gather", 256, 8));
  *next.mutable_gpus()->mutable_gpu_ids() = faulted.gpu_ids();
  const v1::Experiment after = RunToEnd(next);
  EXPECT_EQ(after.state(), v1::FINISHED) << after.reason();
  EXPECT_TRUE(after.result().verification().passed());
}

TEST_F(CustomKernelGpuE2eTest, KernelsThatDoNotCompileFailWithTheCompilersMessage) {
  ExpectCompileError(RunToEnd(IndexRequest(Kernel("tests/e2e/custom_kernels/index_does_not_compile.cu",
                                                  "index_does_not_compile"))),
                     "index_does_not_compile.cu(5): error");
  ExpectCompileError(RunToEnd(StoreRequest(Kernel("tests/e2e/custom_kernels/store_does_not_compile.cu",
                                                  "store_does_not_compile"))),
                     "store_does_not_compile.cu(5): error");
}

}  // namespace
}  // namespace gpuprof::testing
