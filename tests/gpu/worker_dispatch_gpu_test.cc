// The index and store workloads end to end through the worker's dispatcher, as the daemon
// runs them: events per phase, a verified result, the JIT cache, and refusals.
#include <cstdlib>
#include <string>
#include <vector>

#include "daemon/admission/request_validation.h"
#include "worker/experiment_dispatch.h"
#include "gpu/gpu_probe.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::worker {
namespace {

namespace api = ::gpuprof::v1;
using ::testing::HasSubstr;

class CopyWorkloadsGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    setenv("GPUPROF_JIT_CACHE_DIR",
           (std::string(tmp != nullptr ? tmp : "/tmp") + "/workloads_jit").c_str(), 1);
    inventory_ = gpu::ProbeHost({.gpuprof_version = "test"});
    if (inventory_.gpus_size() == 0) GTEST_SKIP() << "no GPU: " << inventory_.probe_error();
  }

  // Runs `request` (defaults applied) on GPU 0; returns the result event, if any.
  worker_protocol::RunFinished Run(api::ExperimentRequest request, api::ExperimentResult* result) {
    request.set_user("test");
    daemon::ApplyRequestDefaults({}, inventory_, request);
    worker_protocol::ExperimentAssignment run;
    run.set_experiment_id("e1");
    *run.mutable_request() = request;
    *run.add_gpus() = inventory_.gpus(0);
    *run.mutable_host() = inventory_.host();
    phases_.clear();
    return RunExperiment(run, [&](const api::ExperimentEvent& event) {
      if (event.has_progress()) phases_.push_back(event.progress().phase());
      if (event.has_result() && result != nullptr) *result = event.result();
    });
  }

  api::ListGpusResponse inventory_;
  std::vector<api::Phase> phases_;
};

TEST_F(CopyWorkloadsGpuTest, IndexRunsVerifiesAndHitsTheCacheTheSecondTime) {
  api::ExperimentRequest request;
  request.mutable_index()->set_num_tokens(64);
  request.mutable_index()->set_hidden_dim(4096);
  request.mutable_index()->set_vocab_size(32000);
  api::ExperimentResult result;
  worker_protocol::RunFinished finished = Run(request, &result);
  ASSERT_TRUE(finished.ok()) << finished.error();
  EXPECT_TRUE(result.verification().checked());
  EXPECT_TRUE(result.verification().passed()) << result.verification().message();
  EXPECT_GT(result.measurement().kernel_time().samples(), 0);
  EXPECT_GT(result.measurement().bandwidth_gbps(), 0);
  EXPECT_EQ(result.measurement().bytes_moved(), 64 * 4 + 2 * 64 * 8192);
  EXPECT_FALSE(result.jit().cache_hit());
  EXPECT_GT(result.jit().compile_ms(), 0);
  EXPECT_EQ(result.kernel_config().at("kernel"), "index_gather");
  EXPECT_EQ(result.provenance().request().index().num_tokens(), 64);
  for (api::Phase phase : {api::PHASE_JIT, api::PHASE_ALLOCATION, api::PHASE_WARMUP,
                           api::PHASE_TIMED, api::PHASE_VERIFICATION}) {
    EXPECT_THAT(phases_, ::testing::Contains(phase)) << api::Phase_Name(phase);
  }
  finished = Run(request, &result);
  ASSERT_TRUE(finished.ok()) << finished.error();
  EXPECT_TRUE(result.jit().cache_hit());
}

TEST_F(CopyWorkloadsGpuTest, MaskedIndexInGraphsAndColdL2) {
  api::ExperimentRequest request;
  auto& index = *request.mutable_index();
  index.set_num_tokens(3000);
  index.set_hidden_dim(2048);
  index.set_vocab_size(50000);
  index.mutable_vocab_range()->set_start(10000);
  index.mutable_vocab_range()->set_end(20000);
  index.set_dtype(api::DATA_TYPE_FP16);
  index.set_use_pdl(true);
  request.mutable_measurement()->set_graph_launches_per_sample(10);
  request.mutable_measurement()->set_l2_mode(api::MeasurementOptions::L2_MODE_COLD);
  api::ExperimentResult result;
  const worker_protocol::RunFinished finished = Run(request, &result);
  ASSERT_TRUE(finished.ok()) << finished.error();
  EXPECT_TRUE(result.verification().passed()) << result.verification().message();
  EXPECT_TRUE(result.measurement().used_cuda_graph());
  EXPECT_EQ(result.kernel_config().at("masked"), "true");
}

TEST_F(CopyWorkloadsGpuTest, StoreEveryPatternAndLaunch) {
  for (api::SlotPattern pattern :
       {api::SLOT_PATTERN_SEQUENTIAL, api::SLOT_PATTERN_RANDOM, api::SLOT_PATTERN_SORTED}) {
    for (api::StoreLaunch launch : {api::STORE_LAUNCH_FUSED_KV, api::STORE_LAUNCH_SEPARATE_KV}) {
      api::ExperimentRequest request;
      auto& store = *request.mutable_store();
      store.set_num_tokens(2000);
      store.set_page_size(16);
      store.set_slot_pattern(pattern);
      store.set_launch(launch);
      api::ExperimentResult result;
      const worker_protocol::RunFinished finished = Run(request, &result);
      ASSERT_TRUE(finished.ok()) << finished.error();
      EXPECT_TRUE(result.verification().passed())
          << api::SlotPattern_Name(pattern) << " " << api::StoreLaunch_Name(launch) << ": "
          << result.verification().message();
      EXPECT_EQ(result.kernel_config().at("launches_per_store"),
                launch == api::STORE_LAUNCH_FUSED_KV ? "1" : "2");
    }
  }
}

TEST_F(CopyWorkloadsGpuTest, TooLargeForFreeMemoryIsRefusedBeforeAllocating) {
  api::ExperimentRequest request;
  request.mutable_index()->set_vocab_size(int64_t{1} << 24);
  request.mutable_index()->set_hidden_dim(65536);
  request.mutable_index()->set_dtype(api::DATA_TYPE_FP32);  // 4 TiB of table
  const worker_protocol::RunFinished finished = Run(request, nullptr);
  EXPECT_FALSE(finished.ok());
  EXPECT_THAT(finished.error(), HasSubstr("index needs"));
  EXPECT_THAT(finished.error(), HasSubstr("free"));
  EXPECT_FALSE(finished.must_not_reuse());
}

}  // namespace
}  // namespace gpuprof::worker
