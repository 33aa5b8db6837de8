// GPU health end to end on a machine without GPUs: the real gpuprofd and CLI, rank workers that
// do everything but the GPU work (tests/ranks/fake_rank_worker.cc) and the stand-in
// libnvidia-ml (gpu/nvml_loader_test_fake_nvml.cc) loaded by the daemon as it would load the
// driver's, which reports the Xid events and memory error counts the test writes to its
// control file. What is real is everything the daemon does about them: which experiment
// fails, which GPU is drained, the store that keeps the drain across a restart, the access
// policy that lets only an admin clear it, the audit trail and the metrics.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/metrics/http_client.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kLong[] = "fake.run_ms=600000";  // runs until something ends it

class GpuHealthE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_dir_ = MakeTempDir("gpuprofd-gpu-health");
    ASSERT_FALSE(state_dir_.empty());
    control_ = state_dir_ + "/nvml_control";
    std::ofstream(control_).close();
    // The daemon inherits these; the fake worker reports GPUs GPU-fake-0..3, and so does NVML.
    setenv("FAKE_NVML_CONTROL", control_.c_str(), 1);
    setenv("FAKE_NVML_GPU_UUIDS", "GPU-fake-0,GPU-fake-1,GPU-fake-2,GPU-fake-3", 1);
    setenv("FAKE_RANK_GPUS", "4", 1);
  }

  // Starts gpuprofd on the test's state directory; the caller (this process's user, who also
  // runs the daemon) is an admin only if `caller_is_admin`.
  void StartDaemon(bool caller_is_admin) {
    std::vector<std::string> flags = {
        "--enable_test_faults",
        "--worker_binary=" + RunfilePath("tests/ranks/fake_rank_worker"),
        "--nvml_library=" + RunfilePath("gpu/libnvml_loader_test_fake_nvml.so"),
        "--gpu_health_interval=200ms",
        "--metrics_listen=127.0.0.1:0",
    };
    if (!caller_is_admin) {
      const std::string policy = state_dir_ + "/policy.textproto";
      std::ofstream(policy) << "policy_version: 1\nadmins: \"carol\"\ndaemon_user_is_admin: false\n"
                               "end_of_policy: true\n";
      flags.push_back("--policy=" + policy);
    }
    daemon_ = std::make_unique<DaemonProcess>(state_dir_, flags);
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started << daemon_->Log();
    ASSERT_THAT(daemon_->Log(), HasSubstr("GPU health: Xid events of GPU(s) 0,1,2,3"));
  }

  // What the driver would report: appended to the fake NVML's control file.
  void Inject(const std::string& line) { std::ofstream(control_, std::ios::app) << line << "\n"; }

  std::string Submit(const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"submit", "collective"};
    args.insert(args.end(), flags.begin(), flags.end());
    const CommandResult result = daemon_->CliAsIs(args);
    EXPECT_EQ(result.exit_code, 0) << result.err << daemon_->Log();
    const std::string id(absl::StripAsciiWhitespace(result.out));
    EXPECT_THAT(id, HasSubstr("exp-"));
    return id.substr(id.find("exp-"), 10);
  }

  v1::Experiment Get(const std::string& id) {
    grpc::ClientContext context;
    v1::GetExperimentRequest request;
    request.set_experiment_id(id);
    v1::Experiment experiment;
    const grpc::Status status = daemon_->NewStub()->GetExperiment(&context, request, &experiment);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return experiment;
  }

  // Polls until the experiment is in `state` (or ends otherwise), at most a minute.
  v1::Experiment WaitFor(const std::string& id, v1::ExperimentState state) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    v1::Experiment experiment = Get(id);
    while (experiment.state() != state && absl::Now() < deadline) {
      if (state == v1::RUNNING && experiment.state() != v1::QUEUED) break;
      absl::SleepFor(absl::Milliseconds(50));
      experiment = Get(id);
    }
    return experiment;
  }

  v1::GpuInfo Gpu(int index) {
    grpc::ClientContext context;
    v1::ListGpusResponse response;
    const grpc::Status status = daemon_->NewStub()->ListGpus(&context, {}, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return index < response.gpus_size() ? response.gpus(index) : v1::GpuInfo();
  }

  // The final state event of an experiment, as `gpuprof watch --json` replays it.
  v1::StateChange FinalState(const std::string& id) {
    const CommandResult watched = daemon_->CliAsIs({"watch", id, "--json"});
    auto events = ParseEventLines(watched.out);
    EXPECT_TRUE(events.ok()) << events.status() << watched.out;
    v1::StateChange last;
    if (events.ok()) {
      for (const v1::ExperimentEvent& event : *events) {
        if (event.has_state()) last = event.state();
      }
    }
    return last;
  }

  // Scrapes /metrics until it holds `line` (the sampler runs every 2 s), at most a minute.
  std::string ScrapeUntil(const std::string& line) {
    const std::string log = daemon_->Log();
    const size_t at = log.rfind("metrics on http://127.0.0.1:");
    int port = 0;
    if (at == std::string::npos ||
        !absl::SimpleAtoi(log.substr(at + 28, log.find('/', at + 28) - at - 28), &port)) {
      ADD_FAILURE() << "no metrics port in the log:\n" << log;
      return "";
    }
    std::string body;
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      auto scraped = HttpGet(port, "/metrics");
      if (scraped.ok()) body = scraped->body;
      if (body.find(line) != std::string::npos) break;
      absl::SleepFor(absl::Milliseconds(200));
    }
    return body;
  }

  std::string state_dir_;
  std::string control_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(GpuHealthE2eTest, ApplicationXidFailsOnlyTheExperimentOnThatGpu) {
  StartDaemon(/*caller_is_admin=*/true);
  EXPECT_EQ(Gpu(0).health(), v1::GPU_HEALTH_HEALTHY);
  const std::string on_01 = Submit({"--gpus", "0,1", "--label", kLong});
  const std::string on_23 = Submit({"--gpus", "2,3", "--label", kLong});
  ASSERT_EQ(WaitFor(on_01, v1::RUNNING).state(), v1::RUNNING) << daemon_->Log();
  ASSERT_EQ(WaitFor(on_23, v1::RUNNING).state(), v1::RUNNING) << daemon_->Log();

  Inject("xid GPU-fake-0 13");
  const v1::Experiment failed = WaitFor(on_01, v1::FAILED);
  ASSERT_EQ(failed.state(), v1::FAILED) << daemon_->Log();
  EXPECT_THAT(failed.reason(), HasSubstr("GPU 0 reported Xid 13 (graphics engine exception"));
  EXPECT_THAT(failed.reason(), HasSubstr("an application fault: the GPU stays in service"));
  const v1::StateChange final_state = FinalState(on_01);
  EXPECT_EQ(final_state.fault_gpu(), 0);
  EXPECT_EQ(final_state.fault_xid(), 13);
  EXPECT_EQ(final_state.fault_class(), v1::GPU_FAULT_CLASS_APPLICATION);

  // The other experiment runs on; the GPU stays in service and takes the next experiment.
  EXPECT_EQ(Get(on_23).state(), v1::RUNNING);
  const v1::GpuInfo gpu0 = Gpu(0);
  EXPECT_EQ(gpu0.health(), v1::GPU_HEALTH_HEALTHY);
  EXPECT_EQ(gpu0.last_xid(), 13);
  EXPECT_EQ(gpu0.xid_events(), 1);
  const CommandResult again =
      daemon_->CliAsIs({"submit", "collective", "--gpus", "0,1", "--follow"});
  EXPECT_EQ(again.exit_code, 0) << again.err << again.out;
  EXPECT_THAT(daemon_->CliAsIs({"gpus"}).out, HasSubstr("ok (Xid 13)"));
  EXPECT_THAT(ScrapeUntil("gpuprof_gpu_xid_events_total{class=\"application\",gpu=\"0\"} 1"),
              HasSubstr("gpuprof_gpu_xid_events_total{class=\"application\",gpu=\"0\"} 1"));
  EXPECT_EQ(daemon_->CliAsIs({"cancel", on_23}).exit_code, 0);
}

TEST_F(GpuHealthE2eTest, HardwareXidDrainsTheGpuAcrossARestartUntilAnAdminClearsIt) {
  StartDaemon(/*caller_is_admin=*/false);
  const std::string victim = Submit({"--gpus", "0,1", "--label", kLong});
  ASSERT_EQ(WaitFor(victim, v1::RUNNING).state(), v1::RUNNING) << daemon_->Log();

  Inject("xid GPU-fake-1 79");
  const v1::Experiment failed = WaitFor(victim, v1::FAILED);
  ASSERT_EQ(failed.state(), v1::FAILED) << daemon_->Log();
  EXPECT_THAT(failed.reason(), HasSubstr("GPU 1 reported Xid 79 (the GPU has fallen off the bus)"));
  EXPECT_THAT(failed.reason(), HasSubstr("drained until an admin clears it"));
  EXPECT_EQ(FinalState(victim).fault_class(), v1::GPU_FAULT_CLASS_HARDWARE);
  const v1::GpuInfo drained = Gpu(1);
  EXPECT_EQ(drained.health(), v1::GPU_HEALTH_UNHEALTHY);
  EXPECT_THAT(drained.health_reason(), HasSubstr("Xid 79"));
  EXPECT_GT(drained.unhealthy_since().seconds(), 0);
  const CommandResult shown = daemon_->CliAsIs({"gpus"});
  EXPECT_THAT(shown.out, HasSubstr("UNHEALTHY (Xid 79)"));
  EXPECT_THAT(shown.out, HasSubstr("GPU 1 drained: Xid 79"));

  // Work that names the drained GPU waits; work that asks for a count goes around it. The
  // waiting one was queued first, so had its GPUs been leasable it would have run first.
  const std::string waiting = Submit({"--gpus", "0,1"});
  const CommandResult around =
      daemon_->CliAsIs({"submit", "collective", "--gpu-count", "2", "--follow", "--json"});
  ASSERT_EQ(around.exit_code, 0) << around.err << daemon_->Log();
  auto events = ParseEventLines(around.out);
  ASSERT_TRUE(events.ok()) << events.status();
  for (const v1::ExperimentEvent& event : *events) {
    if (event.has_state() && event.state().state() == v1::RUNNING) {
      EXPECT_THAT(event.state().gpu_ids(), Not(::testing::Contains(1)));
    }
  }
  EXPECT_EQ(Get(waiting).state(), v1::QUEUED);

  // Only an admin may clear it; the refusal is audited.
  const CommandResult refused = daemon_->CliAsIs({"gpu", "clear", "1"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("only admins may return a drained GPU to service"));
  EXPECT_EQ(Gpu(1).health(), v1::GPU_HEALTH_UNHEALTHY);
  const std::string metrics = ScrapeUntil("gpuprof_gpu_healthy{gpu=\"1\"} 0");
  EXPECT_THAT(metrics, HasSubstr("gpuprof_gpu_healthy{gpu=\"1\"} 0"));
  EXPECT_THAT(metrics, HasSubstr("gpuprof_gpu_healthy{gpu=\"0\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("gpuprof_gpu_xid_events_total{class=\"hardware\",gpu=\"1\"} 1"));

  // A restart keeps the drain (and the waiting experiment); now as an admin.
  daemon_->Stop();
  StartDaemon(/*caller_is_admin=*/true);
  EXPECT_THAT(daemon_->Log(), HasSubstr("GPU 1 stays drained until an admin clears it"));
  EXPECT_EQ(Gpu(1).health(), v1::GPU_HEALTH_UNHEALTHY);
  EXPECT_THAT(Gpu(1).health_reason(), HasSubstr("Xid 79"));
  const CommandResult still_around =
      daemon_->CliAsIs({"submit", "collective", "--gpu-count", "2", "--follow"});
  EXPECT_EQ(still_around.exit_code, 0) << still_around.err;
  EXPECT_EQ(Get(waiting).state(), v1::QUEUED);

  const CommandResult out_of_range = daemon_->CliAsIs({"gpu", "clear", "9"});
  EXPECT_EQ(out_of_range.exit_code, 2) << out_of_range.err;
  EXPECT_THAT(out_of_range.err, HasSubstr("gpu_index: got 9; this host has GPUs 0 to 3"));
  const CommandResult cleared =
      daemon_->CliAsIs({"gpu", "clear", "1", "--reason", "reseated, nvidia-smi -q clean"});
  ASSERT_EQ(cleared.exit_code, 0) << cleared.err;
  EXPECT_THAT(cleared.out, HasSubstr("GPU 1 (GPU-fake-1): back in service"));
  EXPECT_EQ(Gpu(1).health(), v1::GPU_HEALTH_HEALTHY);
  EXPECT_EQ(WaitFor(waiting, v1::FINISHED).state(), v1::FINISHED) << daemon_->Log();
  const CommandResult twice = daemon_->CliAsIs({"gpu", "clear", "1"});
  EXPECT_THAT(twice.err, HasSubstr("GPU 1 is not drained"));

  const CommandResult audit = daemon_->CliAsIs({"audit"});
  EXPECT_THAT(audit.out, HasSubstr("gpu-drain"));
  EXPECT_THAT(audit.out, HasSubstr("gpu-clear"));
  EXPECT_THAT(audit.out, HasSubstr("reseated, nvidia-smi -q clean"));
  EXPECT_THAT(audit.out, HasSubstr("not-admin"));
}

TEST_F(GpuHealthE2eTest, PendingRowRemappingDrainsTheGpu) {
  StartDaemon(/*caller_is_admin=*/true);
  Inject("remap GPU-fake-2 3 1 1 0");
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (Gpu(2).health() != v1::GPU_HEALTH_UNHEALTHY && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  const v1::GpuInfo gpu2 = Gpu(2);
  EXPECT_EQ(gpu2.health(), v1::GPU_HEALTH_UNHEALTHY) << daemon_->Log();
  EXPECT_THAT(gpu2.health_reason(), HasSubstr("a row remapping waits for a GPU reset"));
  EXPECT_EQ(gpu2.memory_errors().remapped_rows_uncorrectable(), 1);
  EXPECT_TRUE(gpu2.memory_errors().remapping_pending());
  EXPECT_THAT(ScrapeUntil("gpuprof_gpu_memory_errors{gpu=\"2\",kind=\"remapped_uncorrectable\"} 1"),
              HasSubstr("gpuprof_gpu_memory_errors{gpu=\"2\",kind=\"remapped_uncorrectable\"} 1"));
}

}  // namespace
}  // namespace gpuprof::testing
