// Sweeps end to end: the real gpuprofd with real worker processes, driven by the real gpuprof
// CLI over a unix socket. No GPU needed: the points are radix runs on the CPU, and the fault
// label makes one point hang on purpose.
#include <algorithm>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;

int64_t Nanos(const google::protobuf::Timestamp& time) {
  return time.seconds() * 1'000'000'000 + time.nanos();
}

class SweepE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_dir_ = MakeTempDir("gpuprofd");
    ASSERT_FALSE(state_dir_.empty());
    StartDaemon();
  }

  void StartDaemon() {
    daemon_ = std::make_unique<DaemonProcess>(
        state_dir_, std::vector<std::string>{"--enable_test_faults", "--worker_idle_timeout=30s",
                                             "--cpu_slots=1"});
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  std::string SubmitSweep(const std::vector<std::string>& args, const std::string& user) {
    std::vector<std::string> argv = {"sweep"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--json");
    const CommandResult result = daemon_->Cli(argv, user);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    v1::Sweep sweep;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(result.out, &sweep).ok()) << result.out;
    return sweep.id();
  }

  v1::Sweep GetSweep(const std::string& id) {
    const CommandResult result = daemon_->Cli({"sweep", "get", id, "--json"});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    v1::Sweep sweep;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(result.out, &sweep).ok()) << result.out;
    return sweep;
  }

  // Polls until `done` holds for the sweep (or a minute and a half passed).
  template <typename Predicate>
  v1::Sweep WaitFor(const std::string& id, Predicate done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(90);
    v1::Sweep sweep;
    while (absl::Now() < deadline) {
      sweep = GetSweep(id);
      if (done(sweep)) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return sweep;
  }

  std::string state_dir_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(SweepE2eTest, SweepRunsEveryPointAsAnExperimentAndReplays) {
  const CommandResult run = daemon_->Cli({"sweep", "radix", "--requests", "200,300", "--users",
                                          "4,8", "--follow", "--format", "csv"},
                                         "alice");
  ASSERT_EQ(run.exit_code, 0) << run.err << daemon_->Log();
  std::vector<std::string> lines = absl::StrSplit(run.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u) << run.out;
  EXPECT_EQ(lines[0],
            "point,num_requests,num_users,state,experiment,gpu_ids,gpu,figure,value,unit,noise,"
            "samples,min_us,median_us,p90_us,p99_us,gb_per_s,tflops,pct_of_copy");
  for (size_t i = 1; i < lines.size(); ++i) EXPECT_THAT(lines[i], HasSubstr(",finished,exp-"));
  EXPECT_THAT(run.err, HasSubstr("finished (all 4 points finished)"));

  const std::string id = std::string(absl::StripSuffix(
      std::string(absl::StrSplit(run.err, '\n').begin()->substr(10)), ": 4 points"));
  const v1::Sweep sweep = GetSweep(id);
  EXPECT_EQ(sweep.state(), v1::SWEEP_FINISHED);
  ASSERT_EQ(sweep.points_size(), 4);
  EXPECT_EQ(sweep.points(3).parameters().at("num_requests"), "300");
  EXPECT_EQ(sweep.points(3).parameters().at("num_users"), "8");
  // Each point is an ordinary experiment that names its sweep.
  const CommandResult point = daemon_->Cli({"get", sweep.points(3).experiment_id(), "--json"});
  auto experiment = ParseExperiment(point.out);
  ASSERT_TRUE(experiment.ok()) << experiment.status();
  EXPECT_EQ(experiment->sweep_id(), id);
  EXPECT_EQ(experiment->sweep_point(), 3);
  EXPECT_EQ(experiment->state(), v1::FINISHED);
  EXPECT_EQ(experiment->request().radix().num_requests(), 300);
  EXPECT_EQ(experiment->request().radix().num_users(), 8);
  EXPECT_EQ(experiment->user(), "alice");

  // Watch replays every event: created first, the sweep's end last, numbered without gaps.
  const CommandResult replay = daemon_->Cli({"sweep", "watch", id, "--json"});
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  std::vector<v1::SweepEvent> events;
  for (absl::string_view line : absl::StrSplit(replay.out, '\n', absl::SkipEmpty())) {
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(std::string(line), &events.emplace_back()).ok());
  }
  ASSERT_GE(events.size(), 2u + 4u);
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].seq(), int64_t(i + 1));
  EXPECT_TRUE(events.front().has_created());
  EXPECT_EQ(events.back().state(), v1::SWEEP_FINISHED);
  EXPECT_EQ(events.back().points_finished(), 4);

  // The table, Markdown and the listing.
  const CommandResult table = daemon_->Cli({"sweep", "get", id});
  EXPECT_THAT(table.out, HasSubstr("4 points: 4 finished"));
  EXPECT_THAT(table.out, HasSubstr("match_ops"));
  const CommandResult markdown = daemon_->Cli({"sweep", "get", id, "--format", "markdown"});
  EXPECT_THAT(markdown.out, HasSubstr("| point | num_requests | num_users | state |"));
  const CommandResult listed = daemon_->Cli({"sweep", "list", "--user", "alice"});
  EXPECT_THAT(listed.out, HasSubstr(id));
}

TEST_F(SweepE2eTest, BadAxesAndPointsAreRejectedBeforeAnythingRuns) {
  const CommandResult bad_value = daemon_->Cli({"sweep", "radix", "--requests", "100,lots"});
  EXPECT_EQ(bad_value.exit_code, 2);
  EXPECT_THAT(bad_value.err, HasSubstr("axis \"num_requests\": value \"lots\""));
  const CommandResult bad_point = daemon_->Cli({"sweep", "radix", "--requests", "100,-5"});
  EXPECT_EQ(bad_point.exit_code, 2);
  EXPECT_THAT(bad_point.err, HasSubstr("point 1 (num_requests=-5)"));
  const CommandResult bad_range = daemon_->Cli({"sweep", "radix", "--requests", "9:2"});
  EXPECT_EQ(bad_range.exit_code, 2);
  EXPECT_THAT(bad_range.err, HasSubstr("range end 2 is below its start 9"));
  const CommandResult no_axis = daemon_->Cli({"sweep", "radix", "--requests", "100"});
  EXPECT_EQ(no_axis.exit_code, 2);
  EXPECT_THAT(no_axis.err, HasSubstr("a sweep needs an axis"));
  // Nothing was stored or run.
  EXPECT_THAT(daemon_->Cli({"sweep", "list"}).out, HasSubstr("no sweeps"));
  EXPECT_THAT(daemon_->Cli({"list"}).out, HasSubstr("no experiments"));
}

TEST_F(SweepE2eTest, KillNineMidSweepLosesNothing) {
  // One CPU slot: point 0 finishes, point 1 hangs (running when the daemon dies), points 2
  // and 3 wait behind it.
  const std::string id = SubmitSweep({"radix", "--requests", "300,301,302,303", "--label",
                                      "k=a,gpuprof.fault=hang,k=b,k=c", "--zip"},
                                     "alice");
  ASSERT_FALSE(id.empty());
  const v1::Sweep before = WaitFor(id, [](const v1::Sweep& sweep) {
    return sweep.points(0).state() == v1::FINISHED && sweep.points(1).state() == v1::RUNNING;
  });
  ASSERT_EQ(before.points(0).state(), v1::FINISHED) << daemon_->Log();
  ASSERT_EQ(before.points(1).state(), v1::RUNNING);
  ASSERT_EQ(before.points(2).state(), v1::QUEUED);
  ASSERT_EQ(before.points(3).state(), v1::QUEUED);

  const absl::Time killed_at = absl::Now();
  daemon_->KillHard();
  // Downtime, which is no part of the interrupted run.
  absl::SleepFor(absl::Seconds(2));
  StartDaemon();

  // The interrupted point runs again as a new experiment, in the place it had in the queue:
  // before points 2 and 3 (one CPU slot, and it hangs, so they wait behind it).
  const v1::Sweep after = WaitFor(id, [](const v1::Sweep& sweep) {
    return sweep.points(1).attempt() == 2 && sweep.points(1).state() == v1::RUNNING;
  });
  ASSERT_EQ(after.state(), v1::SWEEP_RUNNING) << daemon_->Log();
  ASSERT_EQ(after.points(1).state(), v1::RUNNING) << daemon_->Log();
  // The finished point is intact.
  EXPECT_EQ(after.points(0).state(), v1::FINISHED);
  EXPECT_EQ(after.points(0).experiment_id(), before.points(0).experiment_id());
  EXPECT_EQ(after.points(0).experiment().result().SerializeAsString(),
            before.points(0).experiment().result().SerializeAsString());
  EXPECT_EQ(after.points(2).state(), v1::QUEUED);
  EXPECT_EQ(after.points(3).state(), v1::QUEUED);
  EXPECT_EQ(after.points(2).experiment_id(), before.points(2).experiment_id());
  // The interrupted point: a second attempt, the first kept and marked.
  EXPECT_EQ(after.points(1).attempt(), 2);
  ASSERT_EQ(after.points(1).earlier_experiment_ids_size(), 1);
  EXPECT_EQ(after.points(1).earlier_experiment_ids(0), before.points(1).experiment_id());
  EXPECT_NE(after.points(1).experiment_id(), before.points(1).experiment_id());
  auto interrupted = ParseExperiment(daemon_->Cli({"get", before.points(1).experiment_id(), "--json"}).out);
  ASSERT_TRUE(interrupted.ok());
  EXPECT_EQ(interrupted->state(), v1::INTERRUPTED);
  // Its run ends when the daemon last knew it running, not at the restart.
  EXPECT_LE(Nanos(interrupted->finished()), absl::ToUnixNanos(killed_at));
  EXPECT_GE(Nanos(interrupted->finished()), Nanos(interrupted->started()));

  const CommandResult cancelled = daemon_->Cli({"sweep", "cancel", id, "--reason", "enough"});
  EXPECT_EQ(cancelled.exit_code, 0) << cancelled.err;
  EXPECT_THAT(cancelled.out, HasSubstr("cancelled (enough); 1 points had finished"));
  const v1::Sweep ended = GetSweep(id);
  EXPECT_EQ(ended.state(), v1::SWEEP_CANCELLED);
  EXPECT_EQ(ended.points(1).state(), v1::CANCELLED);
  EXPECT_EQ(ended.points(2).state(), v1::CANCELLED);
  EXPECT_EQ(ended.points_finished(), 1);

  // Every event survived, numbered without gaps, the end last.
  const CommandResult replay = daemon_->Cli({"sweep", "watch", id, "--json"});
  EXPECT_EQ(replay.exit_code, 1);  // cancelled: not every point finished
  int64_t expected_seq = 1;
  v1::SweepEvent event;
  for (absl::string_view line : absl::StrSplit(replay.out, '\n', absl::SkipEmpty())) {
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(std::string(line), &event).ok());
    EXPECT_EQ(event.seq(), expected_seq++);
  }
  EXPECT_EQ(event.state(), v1::SWEEP_CANCELLED);
}

TEST_F(SweepE2eTest, ASweepNeverLocksOtherUsersOut) {
  // Twelve points of alice's, one CPU slot; bob submits one experiment while they run.
  const std::string id = SubmitSweep({"radix", "--requests", "4000", "--seed", "1:12"}, "alice");
  ASSERT_FALSE(id.empty());
  WaitFor(id, [](const v1::Sweep& sweep) {
    return sweep.points_running() + sweep.points_finished() >= 1;
  });
  const CommandResult bob = daemon_->Cli({"submit", "radix", "--requests", "300", "--json"}, "bob");
  ASSERT_EQ(bob.exit_code, 0) << bob.err;
  auto events = ParseEventLines(bob.out);
  ASSERT_TRUE(events.ok() && !events->empty());
  const std::string bob_id = events->front().experiment_id();
  int started_at_submit = 0;
  const v1::Sweep at_submit = GetSweep(id);
  for (const v1::SweepPoint& point : at_submit.points()) {
    if (point.state() != v1::QUEUED) ++started_at_submit;
  }

  const v1::Sweep done =
      WaitFor(id, [](const v1::Sweep& sweep) { return sweep.state() != v1::SWEEP_RUNNING; });
  ASSERT_EQ(done.state(), v1::SWEEP_FINISHED) << daemon_->Log();
  auto bob_experiment = ParseExperiment(daemon_->Cli({"get", bob_id, "--json"}).out);
  ASSERT_TRUE(bob_experiment.ok());
  ASSERT_EQ(bob_experiment->state(), v1::FINISHED);
  // Bob's experiment took the slot as soon as the point running when he submitted ended: it
  // did not wait behind the rest of the sweep.
  int started_before_bob = 0;
  for (const v1::SweepPoint& point : done.points()) {
    if (Nanos(point.experiment().started()) < Nanos(bob_experiment->started())) ++started_before_bob;
  }
  EXPECT_LE(started_before_bob, started_at_submit + 1);
  EXPECT_LT(started_before_bob, 12);
}

TEST_F(SweepE2eTest, CompareMatchesPointsGatesOnRegressionsAndUsesBaselines) {
  const std::string a = SubmitSweep({"radix", "--requests", "300", "--seed", "1,2"}, "alice");
  const std::string b = SubmitSweep({"radix", "--requests", "300", "--seed", "2,1"}, "alice");
  for (const std::string& id : {a, b}) {
    ASSERT_EQ(WaitFor(id, [](const v1::Sweep& sweep) {
                return sweep.state() != v1::SWEEP_RUNNING;
              }).state(),
              v1::SWEEP_FINISHED);
  }
  // Points are matched by their parameters, not their order.
  const CommandResult same = daemon_->Cli({"compare", a, b});
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_THAT(same.out, HasSubstr("seed=1"));
  EXPECT_THAT(same.out, HasSubstr("2 point(s) compared: geomean B/A"));
  EXPECT_THAT(same.out, HasSubstr("provenance: same GPU, driver and gpuprof version"));

  // A baseline stands for its run.
  const CommandResult saved = daemon_->Cli({"baseline", "save", "main", a});
  EXPECT_EQ(saved.exit_code, 0) << saved.err;
  EXPECT_EQ(daemon_->Cli({"baseline", "save", "main", b}).exit_code, 2);  // exists
  EXPECT_THAT(daemon_->Cli({"baseline", "list"}).out, HasSubstr(a));
  const CommandResult against_baseline = daemon_->Cli({"compare", "main", b, "--format", "csv"});
  EXPECT_EQ(against_baseline.exit_code, 0) << against_baseline.err;
  EXPECT_THAT(against_baseline.out,
              HasSubstr("point,figure,a,b,unit,ratio,change_pct,noise_a,noise_b,noise,verdict\n"));
  EXPECT_THAT(against_baseline.err, HasSubstr("2 point(s) compared"));

  // Long shared prefixes make prefix matching far slower: a regression beyond any threshold.
  const auto run = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"submit", "radix", "--requests", "300"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--follow");
    argv.push_back("--json");
    const CommandResult result = daemon_->Cli(argv);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    auto events = ParseEventLines(result.out);
    return events.ok() && !events->empty() ? events->front().experiment_id() : std::string();
  };
  const std::string fast = run({"--system-prompt-tokens", "64", "--max-history-tokens", "256"});
  const std::string slow = run({"--system-prompt-tokens", "60000", "--max-history-tokens", "256"});
  // The slow run is far slower whatever the machine does. A CPU rate is judged only with a
  // run-to-run noise to assume (its passes do not bound another run); with one, whether compare
  // may call it worse depends on the noise both runs measured: flagged (and gated) beyond the
  // change chance allows, "same" within it, "unknown" where a run shared the CPU.
  const CommandResult unjudged = daemon_->Cli({"compare", fast, slow, "--fail-on-regression", "20"});
  EXPECT_EQ(unjudged.exit_code, 0) << unjudged.out << unjudged.err;
  EXPECT_THAT(unjudged.out, HasSubstr("1 noise unknown"));
  EXPECT_THAT(unjudged.err, HasSubstr("1 of them worse by more than 20%"));
  const std::vector<std::string> judged = {"--fail-on-regression", "20", "--cpu-run-noise", "10"};
  std::vector<std::string> csv = {"compare", fast, slow, "--format", "csv"};
  csv.insert(csv.end(), judged.begin(), judged.end());
  const CommandResult rows = daemon_->Cli(csv);
  const std::vector<std::string> lines = absl::StrSplit(rows.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << rows.out << rows.err;
  const std::vector<std::string> cells = absl::StrSplit(lines[1], ',');
  ASSERT_EQ(cells.size(), 11u) << lines[1];
  double ratio = 0, chance = 0;
  ASSERT_TRUE(absl::SimpleAtod(cells[5], &ratio)) << lines[1];
  EXPECT_LT(ratio, 0.8) << "long shared prefixes must be slower: " << lines[1];
  const std::string& verdict = cells[10];
  std::vector<std::string> table = {"compare", fast, slow};
  table.insert(table.end(), judged.begin(), judged.end());
  const CommandResult worse = daemon_->Cli(table);
  if (verdict == "worse") {
    EXPECT_EQ(worse.exit_code, 5) << worse.out << worse.err;
    EXPECT_THAT(worse.out, HasSubstr("1 worse"));
    EXPECT_THAT(worse.err, HasSubstr("worse than A by more than 20%"));
  } else if (verdict == "same") {
    // Only where the noise allows a change this large by chance.
    ASSERT_TRUE(absl::SimpleAtod(cells[9], &chance)) << lines[1];
    EXPECT_GE(chance, 1 - ratio) << lines[1];
    EXPECT_EQ(worse.exit_code, 0) << worse.out << worse.err;
  } else {
    EXPECT_EQ(verdict, "unknown") << lines[1];
    EXPECT_EQ(worse.exit_code, 0) << worse.out << worse.err;
    EXPECT_THAT(worse.out, HasSubstr("1 noise unknown"));
    EXPECT_THAT(worse.err, HasSubstr("not gated: 1 point(s) whose noise is unknown (not "
                                     "measured, measured on a shared CPU, or a CPU rate without "
                                     "--cpu-run-noise), 1 of them worse by more than 20%"));
  }
  std::vector<std::string> reversed = {"compare", slow, fast};
  reversed.insert(reversed.end(), judged.begin(), judged.end());
  const CommandResult better = daemon_->Cli(reversed);
  EXPECT_EQ(better.exit_code, 0) << better.err;
  EXPECT_THAT(better.out, HasSubstr(verdict == "worse"     ? "1 better"
                                    : verdict == "same" ? "1 within noise"
                                                        : "1 noise unknown"));
  const CommandResult unknown = daemon_->Cli({"compare", a, "nosuch"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("no experiment, sweep or baseline named \"nosuch\""));
}

}  // namespace
}  // namespace gpuprof::testing
