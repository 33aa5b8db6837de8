// The CLI across a fleet of real daemons: three gpuprofd processes, each with its own state
// directory and socket. One is stopped with SIGSTOP (the kernel still accepts connections;
// nothing answers), and the CLI must not hang on it: per-node deadlines, partial results
// marked as such and exit code 6.
#include <signal.h>

#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kExitPartial = 6;

class FleetCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"gpu-a", "gpu-b", "gpu-c"}) {
      daemons_.push_back(std::make_unique<DaemonProcess>(
          MakeTempDir(std::string("fleet-") + name),
          std::vector<std::string>{"--enable_test_faults"}));
      ASSERT_TRUE(daemons_.back()->Start().ok()) << daemons_.back()->Log();
      fleet_args_.push_back(absl::StrCat("--target=", name, "=", daemons_.back()->target()));
    }
  }
  void TearDown() override {
    for (auto& daemon : daemons_) daemon->Signal(SIGCONT);
  }

  // `gpuprof <fleet targets> args...`, timed.
  CommandResult Fleet(const std::vector<std::string>& args, absl::Duration* took = nullptr) {
    std::vector<std::string> argv = fleet_args_;
    argv.push_back("--user=tester");
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.begin(), RunfilePath("client/gpuprof"));
    const absl::Time start = absl::Now();
    CommandResult result = RunCommand(argv, absl::Seconds(120));
    if (took != nullptr) *took = absl::Now() - start;
    return result;
  }

  std::string Submit(DaemonProcess& daemon, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"submit", "radix", "--num-requests", "300"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("--json");
    const CommandResult result = daemon.Cli(args);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    auto events = ParseEventLines(result.out);
    return events.ok() && !events->empty() ? events->front().experiment_id() : "";
  }

  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
  std::vector<std::string> fleet_args_;
};

TEST_F(FleetCliTest, ListGetCancelWatchAcrossNodesWithQualifiedIds) {
  const std::string on_a = Submit(*daemons_[0]);
  const std::string on_b = Submit(*daemons_[1]);
  ASSERT_EQ(on_a, on_b) << "each daemon numbers its own experiments";
  const std::string hung = Submit(*daemons_[2], {"--label", "gpuprof.fault=hang"});

  const CommandResult list = Fleet({"list"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("gpu-a/" + on_a));
  EXPECT_THAT(list.out, HasSubstr("gpu-b/" + on_b));
  EXPECT_THAT(list.out, HasSubstr("gpu-c/" + hung));

  // The same id on two nodes must be qualified.
  const CommandResult ambiguous = Fleet({"get", on_a});
  EXPECT_EQ(ambiguous.exit_code, 2);
  EXPECT_THAT(ambiguous.err, HasSubstr("exists on gpu-a, gpu-b, gpu-c: qualify it, e.g. gpu-a/"));
  const CommandResult get = Fleet({"get", "gpu-b/" + on_b});
  EXPECT_EQ(get.exit_code, 0) << get.err;
  EXPECT_THAT(get.out, HasSubstr("node: gpu-b"));

  // Cancel on the node that has it; then watch replays its end there.
  const CommandResult cancel = Fleet({"cancel", "gpu-c/" + hung});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
  const CommandResult watch = Fleet({"watch", "gpu-c/" + hung});
  EXPECT_EQ(watch.exit_code, 1) << "a cancelled experiment did not finish";
  EXPECT_THAT(watch.out, HasSubstr("cancelled"));
  const CommandResult unknown = Fleet({"get", "gpu-z/" + hung});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("no node \"gpu-z\" in the fleet (gpu-a, gpu-b, gpu-c)"));
}

TEST_F(FleetCliTest, AStoppedNodeCostsItsDeadlineAndIsReportedAsMissing) {
  const std::string on_a = Submit(*daemons_[0]);
  const std::string on_c = Submit(*daemons_[2]);
  daemons_[2]->Signal(SIGSTOP);

  absl::Duration took;
  const CommandResult list = Fleet({"--node-timeout=2s", "list"}, &took);
  EXPECT_EQ(list.exit_code, kExitPartial) << list.err;
  EXPECT_THAT(list.out, HasSubstr("gpu-a/" + on_a));
  EXPECT_THAT(list.out, Not(HasSubstr("gpu-c/")));
  EXPECT_THAT(list.err, HasSubstr("partial: no answer from gpu-c (DEADLINE_EXCEEDED"));
  // The stuck node costs its deadline, not the nodes' sum or forever.
  EXPECT_LT(took, absl::Seconds(15));
  RecordProperty("list_with_a_stopped_node_ms", absl::StrCat(absl::ToInt64Milliseconds(took)));

  const CommandResult gpus = Fleet({"--node-timeout=2s", "gpus"});
  EXPECT_EQ(gpus.exit_code, kExitPartial);
  EXPECT_THAT(gpus.out, HasSubstr("== gpu-a ("));
  EXPECT_THAT(gpus.out, HasSubstr("== gpu-c (" + daemons_[2]->target() + "): NO ANSWER =="));
  const CommandResult gpus_json = Fleet({"--node-timeout=2s", "gpus", "--json"});
  EXPECT_EQ(gpus_json.exit_code, kExitPartial);
  EXPECT_THAT(gpus_json.out, HasSubstr(R"({"node":"gpu-b","address":")"));
  EXPECT_THAT(gpus_json.out, HasSubstr(R"("error":"DEADLINE_EXCEEDED)"));

  // An unqualified id that only the stopped node might hold: not "not found", but partial.
  const CommandResult get = Fleet({"--node-timeout=2s", "get", "exp-999999"});
  EXPECT_EQ(get.exit_code, kExitPartial);
  EXPECT_THAT(get.err, HasSubstr("no answer from gpu-c"));
  // Qualified ids on answering nodes do not wait for the stopped one.
  EXPECT_EQ(Fleet({"--node-timeout=2s", "get", "gpu-a/" + on_a}).exit_code, 0);

  daemons_[2]->Signal(SIGCONT);
  const CommandResult resumed = Fleet({"--node-timeout=30s", "list"});
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_THAT(resumed.out, HasSubstr("gpu-c/" + on_c));
}

TEST_F(FleetCliTest, AFleetFileNamesNodesAndNodePicksOne) {
  const std::string path = MakeTempDir("fleet-file") + "/fleet.textproto";
  {
    std::ofstream file(path);
    file << "node_timeout: \"20s\"\n";
    const char* names[] = {"gpu-a", "gpu-b", "gpu-c"};
    for (int i = 0; i < 3; ++i) {
      file << "node { name: \"" << names[i] << "\" address: \"" << daemons_[i]->target()
           << "\" }\n";
    }
  }
  const std::string on_b = Submit(*daemons_[1]);
  fleet_args_ = {"--fleet=" + path};
  const CommandResult health = Fleet({"health"});
  EXPECT_EQ(health.exit_code, 0) << health.err;
  EXPECT_THAT(health.out, HasSubstr("== gpu-c ("));
  // One node picked: every command works as on a single daemon, submit included.
  fleet_args_ = {"--fleet=" + path, "--node=gpu-b"};
  const CommandResult get = Fleet({"get", on_b});
  EXPECT_EQ(get.exit_code, 0) << get.err;
  const CommandResult submit = Fleet({"submit", "radix", "--num-requests", "300", "--follow"});
  EXPECT_EQ(submit.exit_code, 0) << submit.err;
  fleet_args_ = {"--fleet=" + path};
  const CommandResult refused = Fleet({"submit", "radix"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_THAT(refused.err, HasSubstr("submit runs on one node: pick it with --node NAME"));
  fleet_args_ = {"--fleet=" + path, "--node=gpu-q"};
  EXPECT_THAT(Fleet({"list"}).err, HasSubstr("--node gpu-q: no such node; the fleet has gpu-a"));
}

// A node that does not answer at submit is left out of a fleet sweep, saying so; its share
// goes to the others. The fleet sweep's id then works for get, watch and cancel, and a
// node's own part by its qualified id.
TEST_F(FleetCliTest, AFleetSweepLeavesOutANodeThatDoesNotAnswerAtSubmit) {
  daemons_[2]->Signal(SIGSTOP);
  const CommandResult submitted = Fleet(
      {"--node-timeout=2s", "sweep", "radix", "--num-requests", "300,400,500,600,700", "--follow"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err;
  EXPECT_THAT(submitted.err,
              HasSubstr("not answering, left out of the sweep: gpu-c (DEADLINE_EXCEEDED"));
  EXPECT_THAT(submitted.err,
              HasSubstr("5 points over 2 node(s): gpu-a/swp-000001 (running, 3 points), "
                        "gpu-b/swp-000001 (running, 2 points)"));
  const size_t at = submitted.err.find("submitted fsw-");
  ASSERT_NE(at, std::string::npos);
  const std::string fleet_id = submitted.err.substr(at + 10, 12);
  EXPECT_THAT(submitted.out, HasSubstr(fleet_id + ": finished"));

  // gpu-c holds no part: its silence does not make the answers partial.
  const CommandResult got = Fleet({"--node-timeout=2s", "sweep", "get", fleet_id});
  EXPECT_EQ(got.exit_code, 0) << got.err;
  EXPECT_THAT(got.out, HasSubstr(fleet_id + "  finished  5 points on 2 node(s)"));
  const CommandResult watched = Fleet({"--node-timeout=2s", "sweep", "watch", fleet_id, "--json"});
  EXPECT_EQ(watched.exit_code, 0) << watched.err;
  EXPECT_THAT(watched.out, HasSubstr(R"({"node":"gpu-b","sweep":"swp-000001","point":)"));
  const CommandResult part = Fleet({"--node-timeout=2s", "sweep", "get", "gpu-b/swp-000001"});
  EXPECT_EQ(part.exit_code, 0) << part.err;
  EXPECT_THAT(part.out, HasSubstr("node: gpu-b"));
  const CommandResult unknown = Fleet({"--node-timeout=2s", "sweep", "get", "fsw-00000000"});
  EXPECT_EQ(unknown.exit_code, kExitPartial);
  EXPECT_THAT(unknown.err, HasSubstr("no answer from gpu-c"));

  // One plot of every node's points.
  const std::string plot = MakeTempDir("fleet-plot") + "/radix.svg";
  const CommandResult plotted =
      Fleet({"--node-timeout=2s", "sweep", "plot", fleet_id, "-o", plot});
  EXPECT_EQ(plotted.exit_code, 0) << plotted.err;
  EXPECT_THAT(plotted.out, HasSubstr("5 point(s) from gpu-a/swp-000001"));
  EXPECT_TRUE(std::ifstream(plot).good());

  daemons_[2]->Signal(SIGCONT);
  const CommandResult twice = Fleet({"sweep", "get", "swp-000001"});
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_THAT(twice.err, HasSubstr("swp-000001 exists on gpu-a, gpu-b: qualify it"));
  const CommandResult missing = Fleet({"sweep", "get", "fsw-00000000"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err,
              HasSubstr("NOT_FOUND: no node of the fleet (gpu-a, gpu-b, gpu-c) holds"));
  const CommandResult too_late = Fleet({"sweep", "cancel", fleet_id});
  EXPECT_EQ(too_late.exit_code, 2);
  EXPECT_THAT(too_late.err, HasSubstr("gpu-a/swp-000001: not cancelled: FAILED_PRECONDITION"));

  // Points that hang until cancelled, over every node: cancelling the fleet sweep ends them.
  const CommandResult hanging =
      Fleet({"sweep", "radix", "--num-requests", "300,400,500", "--label", "gpuprof.fault=hang"});
  ASSERT_EQ(hanging.exit_code, 0) << hanging.err;
  const size_t hanging_at = hanging.out.find("submitted fsw-");
  ASSERT_NE(hanging_at, std::string::npos) << hanging.out;
  const std::string hanging_id = hanging.out.substr(hanging_at + 10, 12);
  const CommandResult cancelled = Fleet({"sweep", "cancel", hanging_id, "--reason", "enough"});
  EXPECT_EQ(cancelled.exit_code, 0) << cancelled.err;
  for (const char* part : {"gpu-a/swp-000002: cancelled (enough)", "gpu-b/swp-000002: cancelled",
                           "gpu-c/swp-000001: cancelled"}) {
    EXPECT_THAT(cancelled.out, HasSubstr(part));
  }
  const CommandResult ended = Fleet({"sweep", "watch", hanging_id});
  EXPECT_EQ(ended.exit_code, 1) << "a cancelled sweep did not finish";
  EXPECT_THAT(ended.out, HasSubstr(hanging_id + ": cancelled"));
}

}  // namespace
}  // namespace gpuprof::testing
