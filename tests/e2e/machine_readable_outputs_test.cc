// The CLI's outputs for scripts, end to end: the real gpuprofd runs two identical radix sweeps
// (CPU only), the real gpuprof prints listings as NDJSON, a sweep as CSV and JSON lines and a
// comparison as CSV and JSON lines, and check_machine_readable.py reads them all back with
// Python's json and csv modules. `get ID --command` is run as printed and asks for the same
// request again.
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/message_differencer.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class MachineReadableOutputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<DaemonProcess>(MakeTempDir("gpuprofd"),
                                              std::vector<std::string>{"--cpu_slots=2"});
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  CommandResult Cli(const std::vector<std::string>& args) {
    const CommandResult result = daemon_->Cli(args);
    EXPECT_EQ(result.exit_code, 0) << absl::StrJoin(args, " ") << ": " << result.err;
    return result;
  }

  void Save(const std::string& directory, const std::string& name, const std::string& text) {
    std::ofstream(directory + "/" + name) << text;
  }

  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(MachineReadableOutputsTest, ListingsSweepsAndComparisonsReadBackInPython) {
  // Two identical sweeps of two points each: swp-000001 and swp-000002.
  for (int i = 0; i < 2; ++i) {
    Cli({"sweep", "radix", "--requests", "200,300", "--follow", "--format", "csv"});
  }
  const std::string directory = MakeTempDir("outputs");
  // Output flags before the command too: the same output.
  const CommandResult listed = Cli({"list", "--json"});
  EXPECT_EQ(Cli({"--json", "list"}).out, listed.out);
  Save(directory, "list.ndjson", listed.out);
  Save(directory, "sweep_list.ndjson", Cli({"sweep", "list", "--json"}).out);
  Save(directory, "sweep.csv", Cli({"sweep", "get", "swp-000001", "--format", "csv"}).out);
  const CommandResult jsonl = Cli({"--format", "jsonl", "sweep", "get", "swp-000001"});
  Save(directory, "sweep.jsonl", jsonl.out);
  Save(directory, "compare.csv", Cli({"compare", "swp-000001", "swp-000002", "--format", "csv"}).out);
  const CommandResult compared = Cli({"compare", "swp-000001", "swp-000002", "--json"});
  Save(directory, "compare.jsonl", compared.out);
  // The summary is for people: on stderr, never in the rows.
  EXPECT_THAT(compared.err, HasSubstr("point(s) compared"));

  const CommandResult check = RunCommand(
      {"/usr/bin/python3", RunfilePath("tests/e2e/check_machine_readable.py"), directory});
  EXPECT_EQ(check.exit_code, 0) << check.err << check.out;

  // Ids alone, for xargs; no header.
  const CommandResult ids = Cli({"list", "-q"});
  const std::vector<std::string> lines = absl::StrSplit(absl::StripSuffix(ids.out, "\n"), '\n');
  EXPECT_EQ(lines.size(), 4u) << ids.out;
  EXPECT_THAT(ids.out, StartsWith("exp-"));
}

TEST_F(MachineReadableOutputsTest, GetCommandRunsTheSameRequestAgain) {
  const CommandResult first = Cli({"submit", "radix", "--requests", "250", "--users", "3",
                                   "--label", "why=a test's label", "--follow", "--json"});
  const auto events = ParseEventLines(first.out);
  ASSERT_TRUE(events.ok() && !events->empty()) << first.out;
  const std::string id = events->front().experiment_id();

  const CommandResult command = Cli({"get", id, "--command"});
  ASSERT_THAT(command.out, StartsWith("gpuprof submit radix "));
  // Run it as a shell would: through sh, with our gpuprof first on the PATH.
  const std::string cli = RunfilePath("client/gpuprof");
  const std::string line(absl::StripSuffix(command.out, "\n"));
  const CommandResult again = RunCommand(
      {"/bin/sh", "-c",
       absl::StrCat("gpuprof() { \"", cli, "\" --target ", daemon_->target(), " \"$@\"; }; ",
                    line, " --follow --json")});
  ASSERT_EQ(again.exit_code, 0) << line << "\n" << again.err;
  const auto rerun = ParseEventLines(again.out);
  ASSERT_TRUE(rerun.ok() && !rerun->empty()) << again.out;

  const auto get = [&](const std::string& experiment_id) {
    const auto experiment = ParseExperiment(Cli({"get", experiment_id, "--json"}).out);
    EXPECT_TRUE(experiment.ok()) << experiment.status();
    return experiment.value_or(v1::Experiment());
  };
  const v1::Experiment before = get(id);
  const v1::Experiment after = get(rerun->front().experiment_id());
  // The same parameters as run, the daemon's defaults included, and the same label.
  std::string differences;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differencer.Compare(before.result().provenance().request().radix(),
                                  after.result().provenance().request().radix()))
      << differences;
  EXPECT_EQ(after.request().labels().at("why"), "a test's label");
}

}  // namespace
}  // namespace gpuprof::testing
