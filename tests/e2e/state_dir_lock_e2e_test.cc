// One daemon per state directory, with the real gpuprofd: a second daemon started on the
// directory of one at work (a systemd restart overlap, two pods on a node) exits at once,
// naming the first one's pid, having changed nothing; the first keeps its running experiment
// and its queue and still runs experiments; and after kill -9 the directory is free again.
#include <sqlite3.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

const std::vector<std::string> kSmallRadix = {"submit", "radix", "--num-requests", "300"};

std::vector<std::string> With(std::vector<std::string> base,
                              const std::vector<std::string>& extra) {
  base.insert(base.end(), extra.begin(), extra.end());
  return base;
}

// Every row of every table, read-only, in a form two dumps can be compared in.
std::string DumpDatabase(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return "cannot open " + path;
  }
  std::vector<std::string> tables;
  sqlite3_stmt* statement = nullptr;
  sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name", -1,
                     &statement, nullptr);
  while (sqlite3_step(statement) == SQLITE_ROW) {
    tables.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(statement, 0)));
  }
  sqlite3_finalize(statement);
  std::string dump;
  for (const std::string& table : tables) {
    absl::StrAppend(&dump, "table ", table, "\n");
    sqlite3_prepare_v2(db, absl::StrCat("SELECT * FROM \"", table, "\"").c_str(), -1, &statement,
                       nullptr);
    while (sqlite3_step(statement) == SQLITE_ROW) {
      for (int column = 0; column < sqlite3_column_count(statement); ++column) {
        const auto* bytes = static_cast<const char*>(sqlite3_column_blob(statement, column));
        const int size = sqlite3_column_bytes(statement, column);
        absl::StrAppend(&dump, sqlite3_column_type(statement, column), ":",
                        absl::BytesToHexString(absl::string_view(bytes, bytes ? size : 0)), " ");
      }
      dump += "\n";
    }
    sqlite3_finalize(statement);
  }
  sqlite3_close(db);
  return dump;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

class StateDirLockE2eTest : public ::testing::Test {
 protected:
  void SetUp() override { state_dir_ = MakeTempDir("one-daemon-per-dir"); }

  std::unique_ptr<DaemonProcess> NewDaemon() const {
    // One CPU slot: a hanging worker keeps it RUNNING and whatever comes next QUEUED.
    return std::make_unique<DaemonProcess>(
        state_dir_, std::vector<std::string>{"--enable_test_faults", "--cpu_slots=1"});
  }

  std::string SubmitDetached(const DaemonProcess& daemon, const std::vector<std::string>& args) {
    const CommandResult result = daemon.Cli(With(args, {"--json"}));
    EXPECT_EQ(result.exit_code, 0) << result.err;
    auto events = ParseEventLines(result.out);
    EXPECT_TRUE(events.ok() && !events->empty()) << result.out;
    return events.ok() && !events->empty() ? events->front().experiment_id() : "";
  }

  v1::Experiment Get(const DaemonProcess& daemon, const std::string& id) {
    const CommandResult result = daemon.Cli({"get", id, "--json"});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    auto experiment = ParseExperiment(result.out);
    EXPECT_TRUE(experiment.ok()) << experiment.status();
    return experiment.ok() ? *experiment : v1::Experiment();
  }

  v1::Experiment WaitForState(const DaemonProcess& daemon, const std::string& id,
                              v1::ExperimentState state) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    v1::Experiment experiment = Get(daemon, id);
    while (experiment.state() != state && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(50));
      experiment = Get(daemon, id);
    }
    return experiment;
  }

  std::string db_path() const { return state_dir_ + "/gpuprof.db"; }

  std::string state_dir_;
};

TEST_F(StateDirLockE2eTest, ASecondDaemonOnTheDirectoryExitsAtOnceAndChangesNothing) {
  auto first = NewDaemon();
  ASSERT_TRUE(first->Start().ok()) << first->Log();
  const std::string running =
      SubmitDetached(*first, With(kSmallRadix, {"--label", "gpuprof.fault=hang"}));
  ASSERT_EQ(WaitForState(*first, running, v1::RUNNING).state(), v1::RUNNING) << first->Log();
  const std::string queued = SubmitDetached(*first, kSmallRadix);
  ASSERT_EQ(Get(*first, queued).state(), v1::QUEUED);
  const std::string before = DumpDatabase(db_path());
  ASSERT_THAT(before, HasSubstr("table experiments"));

  // The second daemon: same state directory, its own socket (and no metrics port), so before
  // the lock it would have started and served.
  auto second = NewDaemon();
  const absl::Time spawned = absl::Now();
  second->SpawnOnly();
  // Without the lock it would serve until killed here; the checks below then show what it did.
  const int status = second->WaitForExit(absl::Seconds(10));
  const absl::Duration took = absl::Now() - spawned;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 4) << status << "\n" << first->Log();
  EXPECT_LT(took, absl::Seconds(5));
  RecordProperty("second_daemon_exit_ms", absl::StrCat(absl::ToInt64Milliseconds(took)));
  // The two share the harness's log file in the state directory.
  EXPECT_THAT(first->Log(),
              HasSubstr(absl::StrCat("gpuprofd: not starting: another gpuprofd (pid ", first->pid(),
                                     ") holds the lock on state directory ", state_dir_, " (",
                                     state_dir_, "/gpuprofd.lock)")));
  EXPECT_THAT(first->Log(), Not(HasSubstr("listening on " + second->target())));
  EXPECT_FALSE(fs::exists(second->target().substr(std::string("unix:").size())));
  EXPECT_EQ(ReadFile(state_dir_ + "/gpuprofd.lock"), absl::StrCat(first->pid(), "\n"));

  // Nor may a daemon of another state directory open this database (--db).
  DaemonProcess elsewhere(MakeTempDir("other-state-dir"),
                          {"--enable_test_faults", "--db=" + db_path()});
  elsewhere.SpawnOnly();
  const int db_status = elsewhere.WaitForExit(absl::Seconds(10));
  EXPECT_TRUE(WIFEXITED(db_status) && WEXITSTATUS(db_status) == 4) << elsewhere.Log();
  EXPECT_THAT(elsewhere.Log(),
              HasSubstr(absl::StrCat("another gpuprofd (pid ", first->pid(),
                                     ") holds the lock on database ", db_path(), " (", db_path(),
                                     ".lock); only one daemon may use it at a time: stop that "
                                     "one first, or give this one another --db")));

  // Nothing in the database changed: the running one is not INTERRUPTED, the queued one not
  // taken.
  EXPECT_EQ(DumpDatabase(db_path()), before);
  EXPECT_EQ(Get(*first, running).state(), v1::RUNNING);
  EXPECT_EQ(Get(*first, queued).state(), v1::QUEUED);

  // The first daemon still starts and finishes experiments: the queued one once the slot
  // frees, and a new submission.
  ASSERT_EQ(first->Cli({"cancel", running}).exit_code, 0);
  const v1::Experiment ran = WaitForState(*first, queued, v1::FINISHED);
  EXPECT_EQ(ran.state(), v1::FINISHED) << ran.reason() << "\n" << first->Log();
  const CommandResult fresh =
      first->Cli(With(kSmallRadix, {"--follow"}), "tester", absl::Seconds(60));
  EXPECT_EQ(fresh.exit_code, 0) << fresh.err << "\n" << first->Log();
  EXPECT_EQ(first->Stop(), 0);
}

TEST_F(StateDirLockE2eTest, AfterKillNineTheDirectoryIsFreeAndTheRestartRecovers) {
  auto first = NewDaemon();
  ASSERT_TRUE(first->Start().ok()) << first->Log();
  const std::string running =
      SubmitDetached(*first, With(kSmallRadix, {"--label", "gpuprof.fault=hang"}));
  ASSERT_EQ(WaitForState(*first, running, v1::RUNNING).state(), v1::RUNNING) << first->Log();
  const std::string queued = SubmitDetached(*first, kSmallRadix);
  const pid_t killed = first->pid();
  first->KillHard();
  // The lock file is left behind with the dead daemon's pid; the kernel released the lock
  // (and its workers never held it: the descriptor is close-on-exec).
  ASSERT_EQ(ReadFile(state_dir_ + "/gpuprofd.lock"), absl::StrCat(killed, "\n"));

  auto restarted = NewDaemon();
  ASSERT_TRUE(restarted->Start().ok()) << restarted->Log();
  EXPECT_EQ(ReadFile(state_dir_ + "/gpuprofd.lock"), absl::StrCat(restarted->pid(), "\n"));
  // Recovered as ever: the running one INTERRUPTED, the queued one run.
  EXPECT_EQ(Get(*restarted, running).state(), v1::INTERRUPTED);
  const v1::Experiment ran = WaitForState(*restarted, queued, v1::FINISHED);
  EXPECT_EQ(ran.state(), v1::FINISHED) << ran.reason() << "\n" << restarted->Log();
  EXPECT_EQ(restarted->Stop(), 0);
}

}  // namespace
}  // namespace gpuprof::testing
