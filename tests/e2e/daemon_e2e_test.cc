// End to end: the real gpuprofd with real worker processes, driven by the real gpuprof CLI
// over a unix socket, with its SQLite database in a temporary directory. No GPU needed: the
// radix workload runs on the CPU, and the fault label makes workers misbehave on purpose.
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/grpcpp.h"
#include <sys/wait.h>
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A radix run of about a tenth of a second: long enough to observe, short enough for CI.
const std::vector<std::string> kSmallRadix = {"submit", "radix", "--num-requests", "300"};

std::vector<std::string> With(std::vector<std::string> base, std::vector<std::string> extra) {
  base.insert(base.end(), extra.begin(), extra.end());
  return base;
}

class DaemonE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_dir_ = MakeTempDir("gpuprofd");
    ASSERT_FALSE(state_dir_.empty());
    StartDaemon();
  }

  void StartDaemon() {
    daemon_ = std::make_unique<DaemonProcess>(
        state_dir_, std::vector<std::string>{"--enable_test_faults", "--worker_idle_timeout=30s"});
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  // Submits without following; returns the new experiment's id.
  std::string SubmitDetached(const std::vector<std::string>& args, const std::string& user) {
    const CommandResult result = daemon_->Cli(With(args, {"--json"}), user);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    auto events = ParseEventLines(result.out);
    EXPECT_TRUE(events.ok()) << events.status() << "\n" << result.out;
    if (!events.ok() || events->empty()) return "";
    EXPECT_EQ(events->front().state().state(), v1::QUEUED);
    return events->front().experiment_id();
  }

  v1::Experiment Get(const std::string& id) {
    const CommandResult result = daemon_->Cli({"get", id, "--json"});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    auto experiment = ParseExperiment(result.out);
    EXPECT_TRUE(experiment.ok()) << experiment.status();
    return experiment.ok() ? *experiment : v1::Experiment();
  }

  v1::Experiment WaitUntilEnded(const std::string& id, absl::Duration timeout = absl::Seconds(60)) {
    const absl::Time deadline = absl::Now() + timeout;
    v1::Experiment experiment;
    while (absl::Now() < deadline) {
      experiment = Get(id);
      if (experiment.state() != v1::QUEUED && experiment.state() != v1::RUNNING) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return experiment;
  }

  v1::Experiment WaitForState(const std::string& id, v1::ExperimentState state) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    v1::Experiment experiment;
    while (absl::Now() < deadline) {
      experiment = Get(id);
      if (experiment.state() == state) break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return experiment;
  }

  std::string state_dir_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(DaemonE2eTest, RadixExperimentStreamsToCompletionAndIsStored) {
  const CommandResult result =
      daemon_->Cli(With(kSmallRadix, {"--follow", "--json", "--label", "team=serving"}), "alice");
  ASSERT_EQ(result.exit_code, 0) << result.err << daemon_->Log();
  auto events = ParseEventLines(result.out);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_GE(events->size(), 4u);

  // Sequence numbers 1, 2, 3, ... and the lifecycle in order.
  for (size_t i = 0; i < events->size(); ++i) EXPECT_EQ((*events)[i].seq(), int64_t(i + 1));
  EXPECT_EQ(events->front().state().state(), v1::QUEUED);
  EXPECT_EQ((*events)[1].state().state(), v1::RUNNING);
  EXPECT_EQ(events->back().state().state(), v1::FINISHED);
  const auto result_event = std::find_if(events->begin(), events->end(),
                                         [](const auto& e) { return e.has_result(); });
  ASSERT_NE(result_event, events->end());
  const bool has_progress = std::any_of(events->begin(), events->end(),
                                        [](const auto& e) { return e.has_progress(); });
  EXPECT_TRUE(has_progress);
  const v1::RadixResult& radix = result_event->result().radix();
  EXPECT_EQ(radix.requests(), 300);
  EXPECT_GT(radix.request_tokens(), 0);
  EXPECT_GT(radix.hit_rate(), 0.0);
  EXPECT_LE(radix.hit_rate(), 1.0);
  ASSERT_EQ(radix.operations_size(), 3);
  EXPECT_EQ(radix.operations(0).operation(), "match_prefix");
  EXPECT_EQ(radix.operations(0).count(), 300);

  // Stored: get returns the same result, with the request as run and its provenance.
  const std::string id = events->front().experiment_id();
  const v1::Experiment stored = Get(id);
  EXPECT_EQ(stored.state(), v1::FINISHED);
  EXPECT_EQ(stored.user(), "alice");
  EXPECT_EQ(stored.result().radix().request_tokens(), radix.request_tokens());
  EXPECT_EQ(stored.request().labels().at("team"), "serving");
  EXPECT_EQ(stored.result().provenance().request().radix().num_requests(), 300);
  EXPECT_GT(stored.result().provenance().worker_pid(), 0);

  // Watch replays everything from any point, and the human rendering shows the result.
  const CommandResult replay = daemon_->Cli({"watch", id, "--from-seq", "2", "--json"});
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  auto replayed = ParseEventLines(replay.out);
  ASSERT_TRUE(replayed.ok());
  ASSERT_EQ(replayed->size(), events->size() - 1);
  EXPECT_EQ(replayed->front().seq(), 2);
  const CommandResult shown = daemon_->Cli({"get", id});
  EXPECT_EQ(shown.exit_code, 0);
  EXPECT_THAT(shown.out, HasSubstr("match_prefix"));
  EXPECT_THAT(shown.out, HasSubstr("finished"));

  const CommandResult listed = daemon_->Cli({"list", "--user", "alice"});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr(id));
}

TEST_F(DaemonE2eTest, KillNineAndRestartLosesNothing) {
  // One finished, one running (a hanging worker), three queued behind it.
  const CommandResult finished_run = daemon_->Cli(With(kSmallRadix, {"--follow", "--json"}));
  ASSERT_EQ(finished_run.exit_code, 0) << finished_run.err;
  auto finished_events = ParseEventLines(finished_run.out);
  ASSERT_TRUE(finished_events.ok());
  const std::string finished_id = finished_events->front().experiment_id();
  const v1::Experiment finished_before = Get(finished_id);

  const std::string running_id =
      SubmitDetached(With(kSmallRadix, {"--label", "gpuprof.fault=hang"}), "tester");
  ASSERT_EQ(WaitForState(running_id, v1::RUNNING).state(), v1::RUNNING);
  std::vector<std::string> queued_ids;
  for (int i = 0; i < 3; ++i) queued_ids.push_back(SubmitDetached(kSmallRadix, "tester"));
  for (const auto& id : queued_ids) ASSERT_EQ(Get(id).state(), v1::QUEUED);

  daemon_->KillHard();
  StartDaemon();

  // Finished results are intact.
  const v1::Experiment finished_after = Get(finished_id);
  EXPECT_EQ(finished_after.state(), v1::FINISHED);
  EXPECT_EQ(finished_after.result().SerializeAsString(),
            finished_before.result().SerializeAsString());
  // The running one was interrupted, and says why.
  const v1::Experiment interrupted = Get(running_id);
  EXPECT_EQ(interrupted.state(), v1::INTERRUPTED);
  EXPECT_THAT(interrupted.reason(), HasSubstr("gpuprofd stopped"));
  // The queued ones run, in the order they were submitted.
  std::vector<int64_t> started;
  for (const auto& id : queued_ids) {
    const v1::Experiment done = WaitUntilEnded(id);
    EXPECT_EQ(done.state(), v1::FINISHED) << id << " " << done.reason();
    started.push_back(done.started().seconds() * 1000000000 + done.started().nanos());
  }
  EXPECT_TRUE(std::is_sorted(started.begin(), started.end()));
  // Every event of the interrupted experiment is still there, numbered without gaps.
  const CommandResult replay = daemon_->Cli({"watch", running_id, "--json"});
  auto events = ParseEventLines(replay.out);
  ASSERT_TRUE(events.ok());
  for (size_t i = 0; i < events->size(); ++i) EXPECT_EQ((*events)[i].seq(), int64_t(i + 1));
  EXPECT_EQ(events->back().state().state(), v1::INTERRUPTED);
}

TEST_F(DaemonE2eTest, CrashingWorkerFailsOnlyItsExperiment) {
  const CommandResult crashed =
      daemon_->Cli(With(kSmallRadix, {"--label", "gpuprof.fault=crash", "--follow"}));
  EXPECT_EQ(crashed.exit_code, 1);
  EXPECT_THAT(crashed.out + crashed.err, HasSubstr("failed"));
  EXPECT_THAT(crashed.out + crashed.err, HasSubstr("killed by signal 11"));

  // The daemon is still serving, and the next experiment runs.
  const CommandResult next = daemon_->Cli(With(kSmallRadix, {"--follow", "--json"}));
  ASSERT_EQ(next.exit_code, 0) << next.err << daemon_->Log();
  auto events = ParseEventLines(next.out);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->back().state().state(), v1::FINISHED);
}

TEST_F(DaemonE2eTest, WorkerFaultsEndWithClearReasons) {
  const std::string crash =
      SubmitDetached(With(kSmallRadix, {"--label", "gpuprof.fault=crash"}), "tester");
  const v1::Experiment crashed = WaitUntilEnded(crash);
  EXPECT_EQ(crashed.state(), v1::FAILED);
  EXPECT_THAT(crashed.reason(), HasSubstr("killed by signal 11"));
  EXPECT_THAT(crashed.worker_stderr_tail(), HasSubstr("injected fault 'crash'"));

  const std::string exit_early =
      SubmitDetached(With(kSmallRadix, {"--label", "gpuprof.fault=exit"}), "tester");
  const v1::Experiment exited = WaitUntilEnded(exit_early);
  EXPECT_EQ(exited.state(), v1::FAILED);
  EXPECT_THAT(exited.reason(), HasSubstr("exited with code 3"));

  const std::string hang = SubmitDetached(
      With(kSmallRadix, {"--label", "gpuprof.fault=hang", "--timeout", "2s"}), "tester");
  const v1::Experiment hung = WaitUntilEnded(hang);
  EXPECT_EQ(hung.state(), v1::TIMED_OUT);
  EXPECT_THAT(hung.reason(), HasSubstr("timeout of 2s"));
  EXPECT_THAT(hung.worker_stderr_tail(), HasSubstr("injected fault 'hang'"));

  // A CUDA error fails the run and retires the worker: the next run gets a fresh process.
  const std::string healthy = SubmitDetached(kSmallRadix, "tester");
  const v1::Experiment first = WaitUntilEnded(healthy);
  ASSERT_EQ(first.state(), v1::FINISHED);
  const std::string reused = SubmitDetached(kSmallRadix, "tester");
  const v1::Experiment second = WaitUntilEnded(reused);
  ASSERT_EQ(second.state(), v1::FINISHED);
  EXPECT_TRUE(second.result().provenance().worker_reused());
  EXPECT_EQ(second.result().provenance().worker_pid(), first.result().provenance().worker_pid());
  const std::string cuda_error =
      SubmitDetached(With(kSmallRadix, {"--label", "gpuprof.fault=cuda-error"}), "tester");
  const v1::Experiment failed = WaitUntilEnded(cuda_error);
  EXPECT_EQ(failed.state(), v1::FAILED);
  EXPECT_THAT(failed.reason(), HasSubstr("cudaErrorIllegalAddress"));
  const std::string after = SubmitDetached(kSmallRadix, "tester");
  const v1::Experiment fresh = WaitUntilEnded(after);
  ASSERT_EQ(fresh.state(), v1::FINISHED);
  EXPECT_FALSE(fresh.result().provenance().worker_reused());
  EXPECT_NE(fresh.result().provenance().worker_pid(), first.result().provenance().worker_pid());
}

TEST_F(DaemonE2eTest, CancelQueuedAndRunning) {
  const std::string running =
      SubmitDetached(With(kSmallRadix, {"--label", "gpuprof.fault=hang"}), "tester");
  ASSERT_EQ(WaitForState(running, v1::RUNNING).state(), v1::RUNNING);
  const std::string queued = SubmitDetached(kSmallRadix, "tester");
  ASSERT_EQ(Get(queued).state(), v1::QUEUED);

  const CommandResult cancel_queued = daemon_->Cli({"cancel", queued, "--reason", "not needed"});
  EXPECT_EQ(cancel_queued.exit_code, 0) << cancel_queued.err;
  EXPECT_THAT(cancel_queued.out, HasSubstr("cancelled (not needed)"));
  const v1::Experiment cancelled_queued = Get(queued);
  EXPECT_EQ(cancelled_queued.state(), v1::CANCELLED);
  EXPECT_EQ(cancelled_queued.reason(), "not needed");

  const CommandResult cancel_running = daemon_->Cli({"cancel", running});
  EXPECT_EQ(cancel_running.exit_code, 0) << cancel_running.err;
  EXPECT_EQ(Get(running).state(), v1::CANCELLED);

  // Cancelling twice is an error that says why; the lease came back and new work runs.
  const CommandResult again = daemon_->Cli({"cancel", running});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_THAT(again.err, HasSubstr("already ended: CANCELLED"));
  const std::string next = SubmitDetached(kSmallRadix, "tester");
  EXPECT_EQ(WaitUntilEnded(next).state(), v1::FINISHED);
}

// Many clients submitting, watching and cancelling at once over gRPC: a queued experiment's
// cancel is committed without the manager's lock, so watchers that attach meanwhile, second
// cancels and restarts must still see every experiment whole: QUEUED then CANCELLED, once each.
TEST_F(DaemonE2eTest, ConcurrentSubmitsWatchesAndCancelsKeepEveryStreamWhole) {
  // Holds the only CPU slot, so every experiment below stays queued until cancelled.
  const std::string blocker =
      SubmitDetached(With(kSmallRadix, {"--label", "gpuprof.fault=hang"}), "tester");
  ASSERT_EQ(WaitForState(blocker, v1::RUNNING).state(), v1::RUNNING);

  constexpr int kClients = 16;
  constexpr int kRounds = 6;
  std::mutex mutex;
  std::vector<std::string> cancelled_ids;
  std::vector<std::string> failures;
  const auto fail = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    failures.push_back(what);
  };
  std::vector<std::thread> clients;
  for (int client = 0; client < kClients; ++client) {
    clients.emplace_back([&, client] {
      auto stub = daemon_->NewStub();
      const auto deadline = [] {
        return std::chrono::system_clock::now() + std::chrono::seconds(120);
      };
      for (int round = 0; round < kRounds; ++round) {
        v1::ExperimentRequest request;
        request.mutable_radix()->set_num_requests(100);
        request.set_user(absl::StrCat("client-", client));
        grpc::ClientContext submit_context;
        submit_context.set_deadline(deadline());
        auto submit = stub->Submit(&submit_context, request);
        v1::ExperimentEvent ack;
        if (!submit->Read(&ack)) {
          fail(absl::StrCat("submit: ", submit->Finish().error_message()));
          return;
        }
        submit_context.TryCancel();
        submit->Finish().IgnoreError();
        const std::string id = ack.experiment_id();

        // Watch and cancel race: the watch may attach before, during or after the cancel.
        grpc::ClientContext watch_context;
        watch_context.set_deadline(deadline());
        v1::WatchRequest watch_request;
        watch_request.set_experiment_id(id);
        auto watch = stub->Watch(&watch_context, watch_request);
        grpc::ClientContext cancel_context;
        cancel_context.set_deadline(deadline());
        v1::CancelRequest cancel;
        cancel.set_experiment_id(id);
        v1::Experiment cancelled;
        const grpc::Status cancel_status = stub->Cancel(&cancel_context, cancel, &cancelled);
        if (!cancel_status.ok() || cancelled.state() != v1::CANCELLED) {
          fail(absl::StrCat("cancel ", id, ": ", cancel_status.error_message(), " state ",
                            v1::ExperimentState_Name(cancelled.state())));
        }
        std::vector<std::string> seen;
        v1::ExperimentEvent event;
        while (watch->Read(&event)) {
          seen.push_back(absl::StrCat(event.seq(), ":",
                                      event.has_state()
                                          ? v1::ExperimentState_Name(event.state().state())
                                          : "other"));
        }
        const grpc::Status watch_status = watch->Finish();
        const std::string stream = absl::StrJoin(seen, ",");
        if (!watch_status.ok() || stream != "1:QUEUED,2:CANCELLED") {
          fail(absl::StrCat("watch ", id, ": [", stream, "] ", watch_status.error_message()));
        }

        grpc::ClientContext again_context;
        again_context.set_deadline(deadline());
        v1::Experiment ignored;
        const grpc::Status again = stub->Cancel(&again_context, cancel, &ignored);
        if (again.error_code() != grpc::StatusCode::FAILED_PRECONDITION) {
          fail(absl::StrCat("second cancel of ", id, ": code ", again.error_code(), " ",
                            again.error_message()));
        }
        std::lock_guard<std::mutex> lock(mutex);
        cancelled_ids.push_back(id);
      }
    });
  }
  for (std::thread& client : clients) client.join();
  EXPECT_THAT(failures, ::testing::IsEmpty());
  ASSERT_EQ(cancelled_ids.size(), size_t{kClients * kRounds});

  // Each submit and each cancel is in the audit trail once.
  auto stub = daemon_->NewStub();
  for (const std::string& id : {cancelled_ids.front(), cancelled_ids.back()}) {
    grpc::ClientContext context;
    v1::ListAuditRequest request;
    request.set_experiment_id(id);
    v1::ListAuditResponse audit;
    ASSERT_TRUE(stub->ListAudit(&context, request, &audit).ok());
    std::vector<std::string> actions;
    for (const v1::AuditEntry& entry : audit.entries()) actions.push_back(entry.action());
    std::sort(actions.begin(), actions.end());
    EXPECT_EQ(absl::StrJoin(actions, ","), "cancel,submit") << id;
  }

  // Every acknowledged cancel survives kill -9.
  daemon_->KillHard();
  StartDaemon();
  stub = daemon_->NewStub();
  for (const std::string& id : cancelled_ids) {
    grpc::ClientContext context;
    v1::GetExperimentRequest request;
    request.set_experiment_id(id);
    v1::Experiment experiment;
    const grpc::Status got = stub->GetExperiment(&context, request, &experiment);
    ASSERT_TRUE(got.ok()) << id << ": code " << got.error_code() << " " << got.error_message();
    EXPECT_EQ(experiment.state(), v1::CANCELLED) << id;
    EXPECT_EQ(experiment.last_seq(), 2) << id;
  }
}

TEST_F(DaemonE2eTest, OneUsersBacklogDoesNotHoldBackAnother) {
  // Alice queues eight behind a blocker; Bob then submits one. Fair share runs Bob's next.
  const std::string blocker =
      SubmitDetached(With(kSmallRadix, {"--label", "gpuprof.fault=hang"}), "alice");
  ASSERT_EQ(WaitForState(blocker, v1::RUNNING).state(), v1::RUNNING);
  std::vector<std::string> alice;
  for (int i = 0; i < 8; ++i) alice.push_back(SubmitDetached(kSmallRadix, "alice"));
  const std::string bob = SubmitDetached(kSmallRadix, "bob");
  EXPECT_EQ(Get(bob).queue_position(), 1);
  ASSERT_EQ(daemon_->Cli({"cancel", blocker}).exit_code, 0);

  const v1::Experiment bob_done = WaitUntilEnded(bob);
  ASSERT_EQ(bob_done.state(), v1::FINISHED);
  int alice_started_before_bob = 0;
  for (const auto& id : alice) {
    const v1::Experiment done = WaitUntilEnded(id);
    ASSERT_EQ(done.state(), v1::FINISHED);
    if (done.started().seconds() * 1000000000 + done.started().nanos() <
        bob_done.started().seconds() * 1000000000 + bob_done.started().nanos()) {
      ++alice_started_before_bob;
    }
  }
  // Alice's first turn may come before Bob's, never more.
  EXPECT_LE(alice_started_before_bob, 1);
}

TEST_F(DaemonE2eTest, BadRequestsGetClearErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"submit", "radix", "--num-requests=-5"},
       "INVALID_ARGUMENT",
       "radix.num_requests: got -5; must be in [1, 10000000]"},
      {{"submit", "radix", "--cache-token-budget=-1"},
       "INVALID_ARGUMENT",
       "radix.cache_token_budget"},
      {{"submit", "radix", "--gpus", "0"},
       "INVALID_ARGUMENT",
       "gpus: radix runs on the CPU; leave the GPU selection empty"},
      {{"submit", "index", "--tokens=-1"},
       "INVALID_ARGUMENT",
       "index.num_tokens: got -1; must be in [1, 16777216]"},
      {{"submit", "index", "--tokens", "9223372036854775807"},
       "INVALID_ARGUMENT",
       "index.num_tokens: got 9223372036854775807"},
      {{"submit", "store", "--tokens", "4096", "--cache-slots", "100"},
       "INVALID_ARGUMENT",
       "store.cache_slots: got 100; must be in [4096, 2147483648]"},
      {{"submit", "index", "--gpus", "0,0"}, "INVALID_ARGUMENT", "GPU 0 is listed twice"},
      {{"submit", "index", "--gpus", "0", "--tp", "2"},
       "INVALID_ARGUMENT",
       "tp_degree: got 2; must be at most the number of GPUs selected (1)"},
      {{"submit", "radix", "--priority", "1000"},
       "INVALID_ARGUMENT",
       "priority: got 1000; must be in [-100, 100]"},
      {{"submit", "radix", "--label", "gpuprof.fault=explode"},
       "INVALID_ARGUMENT",
       "must be one of crash, hang, exit, cuda-error"},
      {{"get", "exp-999999"}, "NOT_FOUND", "exp-999999"},
  };
  for (const Case& c : cases) {
    const CommandResult result = daemon_->Cli(c.args);
    EXPECT_EQ(result.exit_code, 2) << absl::StrJoin(c.args, " ") << "\n" << result.err;
    EXPECT_THAT(result.err, HasSubstr(c.code)) << absl::StrJoin(c.args, " ");
    EXPECT_THAT(result.err, HasSubstr(c.message)) << absl::StrJoin(c.args, " ");
  }

  // A GPU workload on a host without GPUs (CI) is refused before anything is queued; on a GPU
  // host, an unknown GPU id is named instead.
  const CommandResult gpus = daemon_->Cli({"gpus", "--json"});
  ASSERT_EQ(gpus.exit_code, 0) << gpus.err;
  const bool host_has_gpus = gpus.out.find("\"uuid\"") != std::string::npos;
  const CommandResult index = daemon_->Cli({"submit", "index", "--tokens", "64", "--gpus", "63"});
  EXPECT_EQ(index.exit_code, 2);
  if (host_has_gpus) {
    EXPECT_THAT(index.err, HasSubstr("gpus.gpu_ids[0]: GPU 63 does not exist"));
  } else {
    EXPECT_THAT(index.err, HasSubstr("FAILED_PRECONDITION"));
    EXPECT_THAT(index.err, HasSubstr("index runs on a GPU and this host has none"));
  }

  // Oversized messages: a field over its limit is named; a message over the transport limit
  // is refused by gRPC before it reaches the daemon's logic.
  auto stub = daemon_->NewStub();
  v1::ExperimentRequest request;
  request.mutable_radix();
  request.set_user("tester");
  request.set_description(std::string(5000, 'x'));
  {
    grpc::ClientContext context;
    auto reader = stub->Submit(&context, request);
    v1::ExperimentEvent event;
    EXPECT_FALSE(reader->Read(&event));
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(), "description: 5000 bytes; at most 4096 allowed");
  }
  request.set_description(std::string(5 << 20, 'x'));
  {
    grpc::ClientContext context;
    auto reader = stub->Submit(&context, request);
    v1::ExperimentEvent event;
    EXPECT_FALSE(reader->Read(&event));
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  // Nothing above was queued.
  const CommandResult listed = daemon_->Cli({"list", "--json"});
  EXPECT_EQ(listed.exit_code, 0);
  EXPECT_THAT(listed.out, Not(HasSubstr("exp-")));
}

TEST(DaemonE2eJitCacheTest, GpusListingFollowsTheJitCacheAfterRuns) {
  // Workers report the cache after every run, so the listing is not frozen at start-up.
  const std::string cache_dir = MakeTempDir("jit-cache");
  ASSERT_EQ(setenv("GPUPROF_JIT_CACHE_DIR", cache_dir.c_str(), 1), 0);
  DaemonProcess daemon(MakeTempDir("gpuprofd"));
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  unsetenv("GPUPROF_JIT_CACHE_DIR");
  const CommandResult before = daemon.Cli({"gpus"});
  EXPECT_THAT(before.out, HasSubstr(absl::StrCat("jit cache:  ", cache_dir, " (0 entries")));
  std::ofstream(cache_dir + "/index_gather__test.cubin") << "compiled kernel bytes";
  ASSERT_EQ(daemon.Cli(With(kSmallRadix, {"--follow"})).exit_code, 0);
  const CommandResult after = daemon.Cli({"gpus"});
  EXPECT_THAT(after.out, HasSubstr(absl::StrCat("jit cache:  ", cache_dir, " (1 entries, 21 B)")));
}

TEST_F(DaemonE2eTest, GracefulShutdownInterruptsRunningAndKeepsQueued) {
  const std::string running =
      SubmitDetached(With(kSmallRadix, {"--label", "gpuprof.fault=hang"}), "tester");
  ASSERT_EQ(WaitForState(running, v1::RUNNING).state(), v1::RUNNING);
  const std::string queued = SubmitDetached(kSmallRadix, "tester");
  const int status = daemon_->Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << daemon_->Log();
  StartDaemon();
  EXPECT_EQ(Get(running).state(), v1::INTERRUPTED);
  EXPECT_EQ(WaitUntilEnded(queued).state(), v1::FINISHED);
}

}  // namespace
}  // namespace gpuprof::testing
