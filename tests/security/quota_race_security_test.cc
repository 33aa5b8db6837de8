// Finding 2: with max_queued_experiments: 2, parallel submits left 3 queued and parallel 2-point
// sweeps 4 to 6: the check and the commit were separate steps. A second local account
// (gpuprof-mallory, whose policy entry allows 2 queued experiments) now races many CLI
// processes at once against a real gpuprofd whose one CPU slot is held by root's hanging
// experiment, so nothing of mallory's can start or end during the race; whatever the timing,
// no more than 2 of mallory's experiments are ever queued, and a refusal stores nothing.
#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpuprof/v1/profiler.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/testing/daemon_harness.h"
#include "tests/testing/local_account.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kMallory[] = "gpuprof-mallory";
constexpr int kRacers = 24;

// Runs `command(i)` for i in [0, n) on n threads released at the same moment.
std::vector<CommandResult> AllAtOnce(int n, const std::function<CommandResult(int)>& command) {
  std::vector<CommandResult> results(n);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      results[i] = command(i);
    });
  }
  go = true;
  for (std::thread& thread : threads) thread.join();
  return results;
}

class QuotaRaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto mallory = EnsureLocalAccount(kMallory);
    if (!mallory.ok()) GTEST_SKIP() << "no second local account: " << mallory.status();
    mallory_ = *mallory;
    const std::string state_dir = MakeTempDir("gpuprofd-quota-race");
    const std::string policy = MakeTempDir("quota-race-policy") + "/policy.textproto";
    std::ofstream(policy) << "policy_version: 1\n"
                          << "users { user: \"" << kMallory
                          << "\" quota { max_queued_experiments: 2 } }\n"
                          << "end_of_policy: true\n";
    // The real worker (radix runs on the CPU); one CPU slot, which root's hanging experiment
    // holds: mallory's experiments stay queued for the whole test.
    daemon_ = std::make_unique<DaemonProcess>(
        state_dir,
        std::vector<std::string>{"--enable_test_faults", "--cpu_slots=1", "--policy=" + policy});
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started << daemon_->Log();
    const CommandResult blocker = daemon_->CliAsIs(
        {"submit", "radix", "--requests", "100", "--label", "gpuprof.fault=hang", "--json"});
    ASSERT_EQ(blocker.exit_code, 0) << blocker.err;
    auto events = ParseEventLines(blocker.out);
    ASSERT_TRUE(events.ok() && !events->empty()) << blocker.out;
    blocker_ = events->front().experiment_id();
    ASSERT_TRUE(WaitForState(blocker_, v1::RUNNING)) << daemon_->Log();
    stub_ = daemon_->NewStub();
    // The CLI copy every account can run, made before the threads race for it.
    ASSERT_EQ(daemon_->CliAs(mallory_, {"whoami"}).exit_code, 0);
  }

  bool WaitForState(const std::string& id, v1::ExperimentState state) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      auto experiment = ParseExperiment(daemon_->CliAsIs({"get", id, "--json"}).out);
      if (experiment.ok() && experiment->state() == state) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }

  // mallory's experiments as the store has them (asked as root, an admin), and how many of
  // them are queued.
  std::vector<v1::Experiment> MalloryExperiments() {
    grpc::ClientContext context;
    v1::ListExperimentsRequest request;
    request.set_user(kMallory);
    request.set_page_size(1000);
    v1::ListExperimentsResponse response;
    const grpc::Status status = stub_->ListExperiments(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return {response.experiments().begin(), response.experiments().end()};
  }
  int MalloryQueued() {
    int queued = 0;
    for (const v1::Experiment& experiment : MalloryExperiments()) {
      if (experiment.state() == v1::QUEUED) ++queued;
    }
    return queued;
  }
  int MallorySweeps() {
    grpc::ClientContext context;
    v1::ListSweepsRequest request;
    request.set_user(kMallory);
    request.set_page_size(1000);
    v1::ListSweepsResponse response;
    const grpc::Status status = stub_->ListSweeps(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.sweeps_size();
  }
  // The daemon's own count, as `gpuprof quota` shows it.
  int QuotaQueued() {
    grpc::ClientContext context;
    v1::GetQuotaRequest request;
    request.set_user(kMallory);
    v1::QuotaReport report;
    const grpc::Status status = stub_->GetQuota(&context, request, &report);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return report.queued_experiments();
  }
  void CancelMallorysQueued() {
    for (const v1::Experiment& experiment : MalloryExperiments()) {
      if (experiment.state() != v1::QUEUED) continue;
      const CommandResult cancelled = daemon_->CliAs(mallory_, {"cancel", experiment.id()});
      ASSERT_EQ(cancelled.exit_code, 0) << cancelled.err;
    }
    ASSERT_EQ(MalloryQueued(), 0);
  }

  // Every run either succeeded or was refused by the queue quota (exit 4, RESOURCE_EXHAUSTED,
  // the quota named); returns how many succeeded.
  static int Admitted(const std::vector<CommandResult>& results) {
    int admitted = 0;
    for (const CommandResult& result : results) {
      if (result.exit_code == 0) {
        ++admitted;
        continue;
      }
      EXPECT_EQ(result.exit_code, 4) << result.out << result.err;
      EXPECT_THAT(result.err, HasSubstr("RESOURCE_EXHAUSTED: quota max_queued_experiments for "
                                        "gpuprof-mallory (users entry) is 2"));
    }
    return admitted;
  }

  LocalAccount mallory_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::Profiler::Stub> stub_;
  std::string blocker_;
};

TEST_F(QuotaRaceTest, ParallelSubmitsNeverQueueMoreThanTheQuota) {
  const std::vector<CommandResult> results = AllAtOnce(kRacers, [this](int) {
    return daemon_->CliAs(mallory_, {"submit", "radix", "--requests", "100", "--json"});
  });
  const int admitted = Admitted(results);
  std::printf("%d parallel submits: %d admitted, %d refused\n", kRacers, admitted,
              kRacers - admitted);
  EXPECT_EQ(admitted, 2);
  EXPECT_EQ(MalloryQueued(), 2);
  EXPECT_EQ(QuotaQueued(), 2);
  // The refused ones stored nothing.
  EXPECT_EQ(MalloryExperiments().size(), 2u);
  // The blocker held the slot throughout: the count is of queued experiments, not of ended ones.
  EXPECT_TRUE(WaitForState(blocker_, v1::RUNNING));
}

TEST_F(QuotaRaceTest, ParallelTwoPointSweepsNeverQueueMoreThanTheQuota) {
  const std::vector<CommandResult> results = AllAtOnce(kRacers / 2, [this](int) {
    return daemon_->CliAs(mallory_, {"sweep", "radix", "--requests", "100,200", "--json"});
  });
  const int admitted = Admitted(results);
  std::printf("%d parallel 2-point sweeps: %d admitted\n", kRacers / 2, admitted);
  // Two places: one sweep, whole; the others stored nothing.
  EXPECT_EQ(admitted, 1);
  EXPECT_EQ(MallorySweeps(), 1);
  EXPECT_EQ(MalloryQueued(), 2);
  EXPECT_EQ(QuotaQueued(), 2);
  EXPECT_EQ(MalloryExperiments().size(), 2u);
}

TEST_F(QuotaRaceTest, SweepsAndSubmitsRacingTogetherShareTheQuota) {
  // Round after round, all at once: every place freed is raced for again.
  for (int round = 0; round < 3; ++round) {
    const std::vector<CommandResult> results = AllAtOnce(kRacers, [this](int i) {
      return i % 2 == 0
                 ? daemon_->CliAs(mallory_, {"submit", "radix", "--requests", "100"})
                 : daemon_->CliAs(mallory_, {"sweep", "radix", "--requests", "100,200", "--json"});
    });
    Admitted(results);
    const int queued = MalloryQueued();
    std::printf("round %d: %d of mallory's experiments queued\n", round, queued);
    EXPECT_GE(queued, 1);
    EXPECT_LE(queued, 2);
    EXPECT_EQ(QuotaQueued(), queued);
    CancelMallorysQueued();
  }
}

}  // namespace
}  // namespace gpuprof::testing
