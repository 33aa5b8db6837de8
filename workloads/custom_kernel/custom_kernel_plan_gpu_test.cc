// The index and store contract plans on a GPU with the example kernels and the broken ones of
// tests/e2e/custom_kernels: checks before timing, the run ending at a failed check, guard
// bytes, MODE_TEST, the kernel's resources and SASS, and the example written as our gather
// measuring as ours does.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gpu/gpu_probe.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "workloads/custom_kernel/index_contract_plan.h"
#include "workloads/custom_kernel/store_contract_plan.h"
#include "workloads/index/index_runner.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;
using ::testing::HasSubstr;

std::string ReadSource(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

v1::CustomKernel Kernel(const std::string& path, const std::string& name, int block_threads = 0,
                        int items_per_block = 0) {
  v1::CustomKernel kernel;
  kernel.set_source(ReadSource(path));
  EXPECT_FALSE(kernel.source().empty()) << path;
  kernel.set_file_name(path.substr(path.rfind('/') + 1));
  kernel.set_kernel_name(name);
  kernel.set_block_threads(block_threads);
  kernel.set_items_per_block(items_per_block);
  return kernel;
}

class CustomKernelPlanGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    setenv("GPUPROF_JIT_CACHE_DIR",
           (std::string(tmp != nullptr ? tmp : "/tmp") + "/custom_kernel_jit").c_str(), 1);
    inventory_ = gpu::ProbeHost({.gpuprof_version = "test"});
    if (inventory_.gpus_size() == 0) GTEST_SKIP() << "no GPU: " << inventory_.probe_error();
  }

  absl::StatusOr<v1::ExperimentResult> Run(v1::ExperimentRequest request,
                                           RunWorkloadFunction run) {
    request.set_user("test");
    request.mutable_tracing()->set_level(v1::TracingOptions::LEVEL_OFF);
    // The daemon's defaults (daemon/admission/request_validation.cc).
    v1::MeasurementOptions& measurement = *request.mutable_measurement();
    measurement.set_warmup_iterations(10);
    measurement.set_min_iterations(100);
    measurement.set_max_iterations(1000);
    *measurement.mutable_min_time() = google::protobuf::util::TimeUtil::MillisecondsToDuration(50);
    *measurement.mutable_time_budget() = google::protobuf::util::TimeUtil::SecondsToDuration(2);
    measurement.set_noise_target(0.01);
    measurement.set_l2_mode(v1::MeasurementOptions::L2_MODE_HOT);
    assignment_ = {};
    assignment_.set_experiment_id("e1");
    *assignment_.mutable_request() = request;
    *assignment_.add_gpus() = inventory_.gpus(0);
    *assignment_.mutable_host() = inventory_.host();
    const RunContext context{.assignment = assignment_,
                             .progress = [](v1::Phase, int64_t, int64_t, const std::string&) {}};
    return run(context);
  }

  static v1::ExperimentRequest Index(int64_t tokens, int64_t hidden, v1::CustomKernel kernel) {
    v1::ExperimentRequest request;
    request.mutable_index()->set_num_tokens(tokens);
    request.mutable_index()->set_hidden_dim(hidden);
    request.mutable_index()->set_vocab_size(32000);
    request.mutable_index()->set_dtype(v1::DATA_TYPE_BF16);
    *request.mutable_custom_kernel() = std::move(kernel);
    return request;
  }

  static v1::ExperimentRequest Store(v1::CustomKernel kernel) {
    v1::ExperimentRequest request;
    request.mutable_store()->set_num_tokens(1000);
    request.mutable_store()->set_num_kv_heads(8);
    request.mutable_store()->set_head_dim(128);
    request.mutable_store()->set_dtype(v1::DATA_TYPE_BF16);
    request.mutable_store()->set_cache_slots(4096);
    request.mutable_store()->set_page_size(16);
    request.mutable_store()->set_slot_pattern(v1::SLOT_PATTERN_RANDOM);
    *request.mutable_custom_kernel() = std::move(kernel);
    return request;
  }

  v1::ListGpusResponse inventory_;
  worker_protocol::ExperimentAssignment assignment_;
};

void ExpectCheckedTimedAndDescribed(const v1::ExperimentResult& result) {
  EXPECT_TRUE(result.verification().passed()) << result.verification().message();
  const v1::CustomKernelResult& kernel = result.custom_kernel();
  ASSERT_EQ(kernel.checks_size(), 4);  // three fresh inputs, then the timed ones
  for (const v1::Verification& check : kernel.checks()) {
    EXPECT_TRUE(check.passed()) << check.message();
  }
  EXPECT_NE(kernel.checks(0).method(), kernel.checks(1).method());  // fresh seeds
  EXPECT_EQ(kernel.guard_bytes_overwritten(), 0);
  EXPECT_EQ(kernel.source_sha256().size(), 64u);
  EXPECT_GT(kernel.registers_per_thread(), 0);
  EXPECT_GT(kernel.blocks(), 0);
  EXPECT_GT(kernel.blocks_per_sm(), 0);
  EXPECT_GT(kernel.theoretical_occupancy(), 0);
  EXPECT_FALSE(kernel.occupancy_limiter().empty());
  EXPECT_GT(result.measurement().kernel_time().samples(), 0);
  EXPECT_GT(result.measurement().bandwidth_gbps(), 0);
  // SASS, or the reason it is missing (no nvdisasm on the machine).
  if (result.sass_size() == 0) {
    bool noted = false;
    for (const std::string& note : result.not_collected()) noted = noted || note.find("SASS") == 0;
    EXPECT_TRUE(noted);
  }
}

TEST_F(CustomKernelPlanGpuTest, IndexExampleIsCheckedTimedAndDescribed) {
  const absl::StatusOr<v1::ExperimentResult> result =
      Run(Index(4096, 4096, Kernel("examples/custom_kernels/index_gather.cu", "index_gather", 256, 8)),
          &RunIndexContractWorkload);
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectCheckedTimedAndDescribed(*result);
  EXPECT_EQ(result->custom_kernel().blocks(), 512);
}

TEST_F(CustomKernelPlanGpuTest, StoreExampleIsCheckedTimedAndDescribed) {
  const absl::StatusOr<v1::ExperimentResult> result = Run(
      Store(Kernel("examples/custom_kernels/store_scatter.cu", "store_scatter", 256, 8)),
      &RunStoreContractWorkload);
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectCheckedTimedAndDescribed(*result);
}

TEST_F(CustomKernelPlanGpuTest, AWrongIndexKernelStopsAtTheFirstCheckNamingTheElement) {
  const absl::StatusOr<v1::ExperimentResult> result = Run(
      Index(64, 4096, Kernel("tests/e2e/custom_kernels/index_wrong.cu", "index_wrong")),
      &RunIndexContractWorkload);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->verification().passed());
  EXPECT_THAT(result->verification().message(),
              HasSubstr("1 of 262144 elements differ; first at token 17, element 5: got 0x"));
  EXPECT_EQ(result->custom_kernel().checks_size(), 1);
  EXPECT_EQ(result->measurement().kernel_time().samples(), 0);  // never timed
}

TEST_F(CustomKernelPlanGpuTest, GuardBytesCatchAnOutOfBoundsWrite) {
  const absl::StatusOr<v1::ExperimentResult> index = Run(
      Index(64, 4096,
            Kernel("tests/e2e/custom_kernels/index_out_of_bounds.cu", "index_out_of_bounds")),
      &RunIndexContractWorkload);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_FALSE(index->verification().passed());
  EXPECT_THAT(index->verification().message(),
              HasSubstr("out-of-bounds write: 16 guard bytes after the output changed"));
  EXPECT_EQ(index->custom_kernel().guard_bytes_overwritten(), 16);

  const absl::StatusOr<v1::ExperimentResult> store = Run(
      Store(Kernel("tests/e2e/custom_kernels/store_out_of_bounds.cu", "store_out_of_bounds")),
      &RunStoreContractWorkload);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_FALSE(store->verification().passed());
  EXPECT_THAT(store->verification().message(),
              HasSubstr("out-of-bounds write: 8 guard bytes before the V cache changed"));
}

TEST_F(CustomKernelPlanGpuTest, AWrongStoreKernelIsNamedByTokenAndSlot) {
  const absl::StatusOr<v1::ExperimentResult> result = Run(
      Store(Kernel("tests/e2e/custom_kernels/store_wrong.cu", "store_wrong")),
      &RunStoreContractWorkload);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->verification().passed());
  EXPECT_THAT(result->verification().message(), HasSubstr("cache slot"));
  EXPECT_THAT(result->verification().message(), HasSubstr(": got 0x"));
}

TEST_F(CustomKernelPlanGpuTest, TestModeChecksWithoutTiming) {
  v1::CustomKernel kernel = Kernel("examples/custom_kernels/index_gather.cu", "index_gather", 256, 8);
  kernel.set_mode(v1::CustomKernel::MODE_TEST);
  const absl::StatusOr<v1::ExperimentResult> result =
      Run(Index(1000, 2048, std::move(kernel)), &RunIndexContractWorkload);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->verification().passed()) << result->verification().message();
  EXPECT_THAT(result->verification().message(), HasSubstr("not timed"));
  EXPECT_EQ(result->custom_kernel().checks_size(), 3);
  EXPECT_EQ(result->measurement().kernel_time().samples(), 0);
}

TEST_F(CustomKernelPlanGpuTest, ACompileErrorComesBackWithFileAndLine) {
  const absl::StatusOr<v1::ExperimentResult> result = Run(
      Index(64, 4096,
            Kernel("tests/e2e/custom_kernels/index_does_not_compile.cu", "index_does_not_compile")),
      &RunIndexContractWorkload);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("index_does_not_compile.cu(5): error"));
}

// Our gather's algorithm, submitted with our launch for the shape, measures as ours does.
TEST_F(CustomKernelPlanGpuTest, OurGatherSubmittedMeasuresTheSameAsOurs) {
  v1::ExperimentRequest ours = Index(16384, 7168, {});
  ours.clear_custom_kernel();
  const absl::StatusOr<v1::ExperimentResult> builtin = Run(ours, &RunIndexWorkload);
  ASSERT_TRUE(builtin.ok()) << builtin.status();
  const auto& config = builtin->kernel_config();
  ASSERT_TRUE(config.contains("threads") && config.contains("num_splits"));
  const int threads = std::stoi(config.at("threads"));
  const int splits = std::stoi(config.at("num_splits"));
  v1::CustomKernel kernel = Kernel("examples/custom_kernels/index_builtin_gather.cu",
                                   "builtin_gather", threads, threads / 32 / splits);
  kernel.add_compile_options("-DBUILTIN_NUM_SPLITS=" + std::to_string(splits));
  const absl::StatusOr<v1::ExperimentResult> submitted =
      Run(Index(16384, 7168, std::move(kernel)), &RunIndexContractWorkload);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_TRUE(submitted->verification().passed()) << submitted->verification().message();
  EXPECT_EQ(submitted->measurement().bytes_moved(), builtin->measurement().bytes_moved());
  const double ours_us = builtin->measurement().kernel_time().median_us();
  const double theirs_us = submitted->measurement().kernel_time().median_us();
  const double noise = std::max(builtin->measurement().kernel_time().relative_noise(),
                                submitted->measurement().kernel_time().relative_noise());
  RecordProperty("ours_median_us", std::to_string(ours_us));
  RecordProperty("submitted_median_us", std::to_string(theirs_us));
  EXPECT_NEAR(theirs_us / ours_us, 1.0, std::max(0.05, 3 * noise))
      << "ours " << ours_us << " us, submitted " << theirs_us << " us";
}

}  // namespace
}  // namespace gpuprof::workloads
