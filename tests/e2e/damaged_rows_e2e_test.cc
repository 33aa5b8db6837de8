// One damaged row must not hide the rest, against the real gpuprofd: with a finished and a
// queued experiment's stored proto overwritten (pages intact, the bytes no longer parse), the
// daemon still starts and runs the rest of its queue, `gpuprof list --all` lists every other
// experiment and names the damaged ones on stderr (and in its JSON), a get of one says what to
// do, and `gpuprofd --check-db` names both rows and exits non-zero.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/util/json_util.h"
#include "gpuprof/v1/profiler.pb.h"
#include "sqlite3.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// About a tenth of a second of radix on the CPU.
const std::vector<std::string> kSmallRadix = {"submit", "radix", "--num-requests", "300"};

std::vector<std::string> With(std::vector<std::string> base, std::vector<std::string> extra) {
  base.insert(base.end(), extra.begin(), extra.end());
  return base;
}

std::string SubmitDetached(const DaemonProcess& daemon, const std::vector<std::string>& args) {
  const CommandResult result = daemon.Cli(With(args, {"--json"}));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  auto events = ParseEventLines(result.out);
  EXPECT_TRUE(events.ok() && !events->empty()) << result.out;
  return events.ok() && !events->empty() ? events->front().experiment_id() : "";
}

v1::ExperimentState StateOf(const DaemonProcess& daemon, const std::string& id) {
  const CommandResult result = daemon.Cli({"get", id, "--json"});
  auto experiment = ParseExperiment(result.out);
  return experiment.ok() ? experiment->state() : v1::EXPERIMENT_STATE_UNSPECIFIED;
}

bool WaitForState(const DaemonProcess& daemon, const std::string& id, v1::ExperimentState state) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    if (StateOf(daemon, id) == state) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

// Overwrites the experiments' stored protos with bytes that do not parse, through SQLite as
// any other process would: the pages stay intact, so only reading the rows finds it.
void DamageProtos(const std::string& db_path, const std::vector<std::string>& ids) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  for (const std::string& id : ids) {
    const std::string sql =
        absl::StrCat("UPDATE experiments SET proto = X'ffffffffff' WHERE id = '", id, "'");
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
    EXPECT_EQ(sqlite3_changes(db), 1) << id;
  }
  sqlite3_close(db);
}

TEST(DamagedRowsE2eTest, ADamagedFinishedAndQueuedExperimentHideNothingElse) {
  const std::string state_dir = MakeTempDir("damaged-rows");
  const std::string db_path = state_dir + "/gpuprof.db";
  DaemonProcess daemon(state_dir, {"--enable_test_faults"});
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();

  // Finished: one damaged, one intact. Then a hanging run holds the CPU slot, so that the
  // next two stay queued: one to damage, one that must run after the restart.
  const std::string damaged_finished = SubmitDetached(daemon, With(kSmallRadix, {"--follow"}));
  const std::string finished = SubmitDetached(daemon, With(kSmallRadix, {"--follow"}));
  const std::string hanging =
      SubmitDetached(daemon, With(kSmallRadix, {"--label", "gpuprof.fault=hang"}));
  ASSERT_TRUE(WaitForState(daemon, hanging, v1::RUNNING)) << daemon.Log();
  const std::string damaged_queued = SubmitDetached(daemon, kSmallRadix);
  const std::string queued = SubmitDetached(daemon, kSmallRadix);
  ASSERT_EQ(StateOf(daemon, damaged_finished), v1::FINISHED);
  ASSERT_EQ(StateOf(daemon, queued), v1::QUEUED);

  daemon.KillHard();
  DamageProtos(db_path, {damaged_finished, damaged_queued});

  // --check-db names both rows and fails.
  const CommandResult check =
      RunCommand({RunfilePath("daemon/gpuprofd"), "--check-db", "--db=" + db_path});
  EXPECT_NE(check.exit_code, 0) << check.out;
  EXPECT_THAT(check.err, HasSubstr("2 damaged row(s)"));
  EXPECT_THAT(check.err, HasSubstr(absl::StrCat("table experiments, ", damaged_finished, ": ")));
  EXPECT_THAT(check.err, HasSubstr(absl::StrCat("table experiments, ", damaged_queued, ": ")));

  // The daemon starts, says what it skipped and what to do, and runs the rest of its queue.
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  EXPECT_THAT(daemon.Log(), HasSubstr(absl::StrCat("not recovered: ", damaged_queued)));
  EXPECT_THAT(daemon.Log(), HasSubstr("gpuprofd --check-db"));
  EXPECT_TRUE(WaitForState(daemon, queued, v1::FINISHED)) << daemon.Log();
  EXPECT_EQ(StateOf(daemon, hanging), v1::INTERRUPTED);

  // `list --all` lists the rest and names the damaged rows on stderr.
  const CommandResult listed = daemon.Cli({"list", "--all"});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  for (const std::string& id : {finished, hanging, queued}) {
    EXPECT_THAT(listed.out, HasSubstr(id));
  }
  EXPECT_THAT(listed.out, Not(HasSubstr(damaged_finished)));
  EXPECT_THAT(listed.out, Not(HasSubstr(damaged_queued)));
  for (const std::string& id : {damaged_finished, damaged_queued}) {
    EXPECT_THAT(listed.err, HasSubstr(absl::StrCat("gpuprof: ", id, " is not listed")));
  }
  EXPECT_THAT(listed.err, HasSubstr("gpuprofd --check-db"));

  // --json: one Experiment per line for the rows that read; the damaged ones on stderr.
  const CommandResult json = daemon.Cli({"list", "--all", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto listed_json = ParseJsonLines<v1::Experiment>(json.out);
  ASSERT_TRUE(listed_json.ok()) << listed_json.status();
  EXPECT_EQ(listed_json->size(), 3u);
  for (const std::string& id : {damaged_finished, damaged_queued}) {
    EXPECT_THAT(json.out, Not(HasSubstr(id)));
    EXPECT_THAT(json.err, HasSubstr(absl::StrCat("gpuprof: ", id, " is not listed")));
  }

  // A get of a damaged one names it and what to do.
  const CommandResult got = daemon.Cli({"get", damaged_finished});
  EXPECT_NE(got.exit_code, 0);
  EXPECT_THAT(got.err, HasSubstr(damaged_finished));
  EXPECT_THAT(got.err, HasSubstr("gpuprofd --check-db"));
}

}  // namespace
}  // namespace gpuprof::testing
