// The daemon's process model for tensor parallelism, end to end on a CPU-only machine: the real
// gpuprofd and CLI over a real socket, with rank workers that do everything a rank worker does
// but the GPU work (fake_rank_worker.cc). One worker process per rank, rank 0's NCCL id relayed
// to every rank, the ranks' events merged into one experiment with one result, warm groups kept
// with their communicator, and any rank's crash or hang ending the whole experiment with its
// GPUs freed.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kTwoRankAllReduce = {"submit", "collective", "--gpus", "2,3",
                                                    "--follow", "--json"};

std::vector<std::string> With(std::vector<std::string> base, std::vector<std::string> extra) {
  base.insert(base.end(), extra.begin(), extra.end());
  return base;
}

// What one rank said it was told ("rank 1 of 2 pid 77 id fake-nccl-id-of-pid-70 reuse 0 ...").
struct RankReport {
  int rank = -1;
  int world_size = 0;
  int pid = 0;
  std::string id;
  bool reuse = false;
  int gpus = 0;
  int links = 0;
  int event_rank = -1;  // the rank the daemon stamped on the event
};

std::vector<RankReport> RankReports(const std::vector<v1::ExperimentEvent>& events) {
  std::vector<RankReport> reports;
  for (const v1::ExperimentEvent& event : events) {
    if (!event.has_progress()) continue;
    const std::vector<std::string> words = absl::StrSplit(event.progress().message(), ' ');
    if (words.size() != 14 || words[0] != "rank") continue;
    RankReport report;
    (void)absl::SimpleAtoi(words[1], &report.rank);
    (void)absl::SimpleAtoi(words[3], &report.world_size);
    (void)absl::SimpleAtoi(words[5], &report.pid);
    report.id = words[7];
    report.reuse = words[9] == "1";
    (void)absl::SimpleAtoi(words[11], &report.gpus);
    (void)absl::SimpleAtoi(words[13], &report.links);
    report.event_rank = event.rank();
    reports.push_back(report);
  }
  return reports;
}

class RankSupervisionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_dir_ = MakeTempDir("gpuprofd-ranks");
    ASSERT_FALSE(state_dir_.empty());
    daemon_ = std::make_unique<DaemonProcess>(
        state_dir_,
        std::vector<std::string>{"--enable_test_faults", "--worker_idle_timeout=60s",
                                 "--worker_binary=" + RunfilePath("tests/ranks/fake_rank_worker")});
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started << daemon_->Log();
  }

  std::vector<v1::ExperimentEvent> Run(const std::vector<std::string>& args, int expected_exit) {
    const CommandResult result = daemon_->Cli(args);
    EXPECT_EQ(result.exit_code, expected_exit) << result.err << daemon_->Log();
    auto events = ParseEventLines(result.out);
    EXPECT_TRUE(events.ok()) << events.status() << "\n" << result.out;
    return events.ok() ? *events : std::vector<v1::ExperimentEvent>();
  }

  v1::Experiment Get(const std::string& id) {
    const CommandResult result = daemon_->Cli({"get", id, "--json"});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    auto experiment = ParseExperiment(result.out);
    EXPECT_TRUE(experiment.ok()) << experiment.status();
    return experiment.ok() ? *experiment : v1::Experiment();
  }

  // GPU index -> experiment it is leased to.
  std::map<int, std::string> Leases() {
    const CommandResult result = daemon_->Cli({"gpus", "--json"});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    std::map<int, std::string> leases;
    for (int gpu = 0; gpu < 4; ++gpu) leases[gpu] = "";
    // The JSON names the lease per GPU; "leasedToExperiment" appears only when set.
    for (int gpu = 0; gpu < 4; ++gpu) {
      const std::string marker = "\"uuid\":\"GPU-fake-" + std::to_string(gpu) + "\"";
      const size_t at = result.out.find(marker);
      EXPECT_NE(at, std::string::npos) << "GPU " << gpu << " missing from " << result.out;
      if (at == std::string::npos) continue;
      const size_t end = result.out.find('}', at);
      const size_t lease = result.out.find("leasedToExperiment", at);
      if (lease != std::string::npos && lease < end) leases[gpu] = "leased";
    }
    return leases;
  }

  std::string state_dir_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(RankSupervisionTest, OneWorkerPerRankWithTheRelayedIdAndOneResult) {
  const std::vector<v1::ExperimentEvent> events = Run(kTwoRankAllReduce, 0);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().state().state(), v1::FINISHED);
  const std::vector<RankReport> reports = RankReports(events);
  ASSERT_EQ(reports.size(), 2u);
  std::set<int> ranks, pids, stamped;
  std::set<std::string> ids;
  for (const RankReport& report : reports) {
    ranks.insert(report.rank);
    pids.insert(report.pid);
    ids.insert(report.id);
    stamped.insert(report.event_rank);
    EXPECT_EQ(report.world_size, 2);
    EXPECT_EQ(report.gpus, 1) << "a rank sees its own GPU only";
    EXPECT_EQ(report.links, 2) << "the links between the group's GPUs 2 and 3, both ways";
    EXPECT_FALSE(report.reuse);
    EXPECT_EQ(report.event_rank, report.rank) << "the daemon stamps each event with its rank";
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1}));
  EXPECT_EQ(pids.size(), 2u) << "one process per rank";
  ASSERT_EQ(ids.size(), 1u) << "every rank got the same id";
  // The id is the one rank 0's process made.
  const RankReport& rank0 = reports[0].rank == 0 ? reports[0] : reports[1];
  EXPECT_EQ(*ids.begin(), "fake-nccl-id-of-pid-" + std::to_string(rank0.pid));

  int results = 0;
  for (const v1::ExperimentEvent& event : events) {
    if (!event.has_result()) continue;
    ++results;
    EXPECT_EQ(event.rank(), 0);
    EXPECT_DOUBLE_EQ(event.result().collective().busbw_gbps(), 100.0);  // rank 0's
    EXPECT_EQ(event.result().collective().ranks(), 2);
  }
  EXPECT_EQ(results, 1) << "one result for the experiment";
}

TEST_F(RankSupervisionTest, AWarmGroupIsReusedWithItsCommunicator) {
  const std::vector<RankReport> first = RankReports(Run(kTwoRankAllReduce, 0));
  const std::vector<RankReport> second = RankReports(Run(kTwoRankAllReduce, 0));
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(second.size(), 2u);
  std::map<int, int> first_pid;
  for (const RankReport& report : first) first_pid[report.rank] = report.pid;
  for (const RankReport& report : second) {
    EXPECT_TRUE(report.reuse);
    EXPECT_EQ(report.pid, first_pid[report.rank]) << "rank " << report.rank;
    EXPECT_EQ(report.id, "") << "a kept communicator needs no new id";
  }
  // Another GPU set is another group.
  const std::vector<RankReport> other =
      RankReports(Run({"submit", "collective", "--gpus", "0,1", "--follow", "--json"}, 0));
  ASSERT_EQ(other.size(), 2u);
  for (const RankReport& report : other) EXPECT_FALSE(report.reuse);
}

TEST_F(RankSupervisionTest, ACrashingRankEndsTheGroupAndFreesEveryGpu) {
  const std::vector<v1::ExperimentEvent> events =
      Run(With(kTwoRankAllReduce, {"--label", "gpuprof.fault=crash@1"}), 1);
  ASSERT_FALSE(events.empty());
  const v1::StateChange& end = events.back().state();
  EXPECT_EQ(end.state(), v1::FAILED);
  EXPECT_THAT(end.reason(), HasSubstr("rank 1's worker process killed by signal 11"));
  for (const auto& [gpu, lease] : Leases()) EXPECT_EQ(lease, "") << "GPU " << gpu;
  // The GPUs take the next experiment, on a fresh group (the survivor was not kept).
  const std::vector<v1::ExperimentEvent> next = Run(kTwoRankAllReduce, 0);
  ASSERT_FALSE(next.empty());
  EXPECT_EQ(next.back().state().state(), v1::FINISHED);
  for (const RankReport& report : RankReports(next)) EXPECT_FALSE(report.reuse);
}

TEST_F(RankSupervisionTest, AHangingRankTimesOutTheGroupAtTheDeadline) {
  const absl::Time start = absl::Now();
  const CommandResult submitted = daemon_->Cli({"submit", "collective", "--gpus", "2,3", "--label",
                                                "gpuprof.fault=hang@0", "--timeout", "2s", "--json"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  auto queued = ParseEventLines(submitted.out);
  ASSERT_TRUE(queued.ok() && !queued->empty()) << submitted.out;
  const std::string id = queued->front().experiment_id();
  // While the ranks run, both GPUs are leased (and the others are not).
  v1::Experiment experiment = Get(id);
  while (experiment.state() == v1::QUEUED) experiment = Get(id);
  ASSERT_EQ(experiment.state(), v1::RUNNING);
  const std::map<int, std::string> running = Leases();
  EXPECT_EQ(running.at(2), "leased");
  EXPECT_EQ(running.at(3), "leased");
  EXPECT_EQ(running.at(0), "");
  while (experiment.state() == v1::RUNNING && absl::Now() - start < absl::Seconds(30)) {
    absl::SleepFor(absl::Milliseconds(50));
    experiment = Get(id);
  }
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(experiment.state(), v1::TIMED_OUT);
  EXPECT_THAT(experiment.reason(), HasSubstr("every rank's worker was killed"));
  // What each rank's process was doing when the deadline passed, rank by rank.
  EXPECT_THAT(experiment.reason(), HasSubstr("; at the deadline: rank 0 (GPU 2, pid "));
  // The other rank finished its part and waits for its peer (or is done).
  EXPECT_THAT(experiment.reason(), ::testing::ContainsRegex("; rank 1 (\\(GPU 3, pid |done)"));
  EXPECT_THAT(experiment.reason(), HasSubstr(" s before"));
  EXPECT_LT(took, absl::Seconds(12)) << "ends within seconds of the deadline";
  for (const auto& [gpu, lease] : Leases()) EXPECT_EQ(lease, "") << "GPU " << gpu;
  const std::vector<v1::ExperimentEvent> next = Run(kTwoRankAllReduce, 0);
  ASSERT_FALSE(next.empty());
  EXPECT_EQ(next.back().state().state(), v1::FINISHED);
}

TEST_F(RankSupervisionTest, TensorParallelismIsCheckedBeforeAnyWorkerStarts) {
  const CommandResult mismatch =
      daemon_->Cli({"submit", "collective", "--gpus", "0,1", "--tp", "1"});
  EXPECT_EQ(mismatch.exit_code, 2);
  EXPECT_THAT(mismatch.err, HasSubstr("collective runs one rank per GPU, so they must be equal"));
  const CommandResult too_many = daemon_->Cli({"submit", "collective", "--gpu-count", "8"});
  EXPECT_EQ(too_many.exit_code, 2);
  EXPECT_THAT(too_many.err, HasSubstr("this host has 4"));
}

}  // namespace
}  // namespace gpuprof::testing
