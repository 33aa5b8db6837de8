// Adversarial tests of who the daemon takes a local caller for, and of the server's own
// resources: a second local account (gpuprof-mallory) attacks a real gpuprofd that root (the
// daemon's account, an admin) and another user (gpuprof-alice) share.
//   - loopback TCP identity cannot be forged, TIME_WAIT port reuse included (finding 1);
//   - a connection flood of one account never locks out another (finding 3);
//   - the state directory and database are private, the socket's group is honoured (finding 5).
#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "tests/testing/daemon_harness.h"
#include "tests/testing/local_account.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// How long a victim's request may take while the box is under attack. A CLI run is a process
// start plus a connection plus the call; sanitizers slow the start.
#if defined(GPUPROF_ASAN_BUILD) || defined(GPUPROF_TSAN_BUILD)
constexpr absl::Duration kAnsweredWithin = absl::Seconds(3);
#else
constexpr absl::Duration kAnsweredWithin = absl::Seconds(1);
#endif

mode_t ModeOf(const std::string& path) {
  struct stat status {};
  EXPECT_EQ(stat(path.c_str(), &status), 0) << path;
  return status.st_mode & 07777;
}

// The experiment id from `submit --json` output (its first event).
std::string SubmittedId(const CommandResult& result) {
  auto events = ParseEventLines(result.out);
  return events.ok() && !events->empty() ? events->front().experiment_id() : "";
}

class SharedBoxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto mallory = EnsureLocalAccount("gpuprof-mallory");
    if (!mallory.ok()) GTEST_SKIP() << "no second local account: " << mallory.status();
    auto alice = EnsureLocalAccount("gpuprof-alice");
    if (!alice.ok()) GTEST_SKIP() << "no second local account: " << alice.status();
    mallory_ = *mallory;
    alice_ = *alice;
  }

  // A daemon with a unix socket and loopback TCP, whose experiments hang until cancelled when
  // labelled so (the fake worker's two fake GPUs).
  void StartDaemon(const std::vector<std::string>& flags) {
    state_dir_ = MakeTempDir("gpuprofd-shared");
    port_ = FreeLoopbackPort();
    daemon_ = std::make_unique<DaemonProcess>(
        state_dir_, std::vector<std::string>{
                        "--enable_test_faults",
                        "--worker_binary=" + RunfilePath("tests/ranks/fake_rank_worker")});
    daemon_->AddFlags({absl::StrCat("--listen=", daemon_->target(), ",127.0.0.1:", port_)});
    daemon_->AddFlags(flags);
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started << daemon_->Log();
  }

  // The CLI as `account` over loopback TCP.
  CommandResult CliOverTcpAs(const LocalAccount& account, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {SharedBinary("client/gpuprof"),
                                     absl::StrCat("--target=127.0.0.1:", port_)};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommandAs(account, argv);
  }

  std::string SubmitHangingAs(const LocalAccount& account) {
    const CommandResult result = daemon_->CliAs(
        account, {"submit", "collective", "--gpus", "0,1", "--label", "gpuprof.fault=hang",
                  "--json"});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return SubmittedId(result);
  }

  std::string StateOf(const std::string& id) {
    const CommandResult result = daemon_->CliAsIs({"get", id, "--json"});
    auto experiment = ParseExperiment(result.out);
    return experiment.ok() ? v1::ExperimentState_Name(experiment->state()) : result.err;
  }

  LocalAccount mallory_;
  LocalAccount alice_;
  std::string state_dir_;
  int port_ = 0;
  std::unique_ptr<DaemonProcess> daemon_;
};

// Finding 1: a closed connection's TIME_WAIT line carries uid 0; reconnecting from its port
// was taken for root about half the time. Every attempt must be mallory or nobody.
TEST_F(SharedBoxTest, LoopbackIdentityCannotBeForgedByReusingATimeWaitPort) {
  StartDaemon({});
  const CommandResult root_submit = daemon_->CliAsIs(
      {"submit", "collective", "--gpus", "0,1", "--label", "gpuprof.fault=hang", "--json"});
  ASSERT_EQ(root_submit.exit_code, 0) << root_submit.err;
  const std::string root_experiment = SubmittedId(root_submit);
  ASSERT_FALSE(root_experiment.empty());

  // The honest path: over loopback TCP mallory is mallory, and not an admin.
  const CommandResult who = CliOverTcpAs(mallory_, {"whoami"});
  ASSERT_EQ(who.exit_code, 0) << who.err;
  EXPECT_THAT(who.out, HasSubstr("gpuprof-mallory"));
  EXPECT_THAT(who.out, HasSubstr("loopback TCP owner"));

  const CommandResult attack = RunCommandAs(
      mallory_, {SharedBinary("tests/security/adversary"), "spoof-loopback",
                 absl::StrCat("--port=", port_), "--tries=30",
                 "--cancel=" + root_experiment},
      absl::Seconds(240));
  ASSERT_EQ(attack.exit_code, 0) << attack.out << attack.err;
  int answered_as_mallory = 0;
  int time_wait_seen = 0;
  for (absl::string_view line : absl::StrSplit(attack.out, '\n', absl::SkipEmpty())) {
    SCOPED_TRACE(std::string(line));
    if (absl::StrContains(line, "whoami=OK")) {
      // Identified: only ever as mallory, never an admin.
      EXPECT_THAT(std::string(line), HasSubstr("user=gpuprof-mallory admin=0"));
      ++answered_as_mallory;
    }
    // Admin-only and owner-only calls are refused (PERMISSION_DENIED 7 or UNAUTHENTICATED 16).
    EXPECT_THAT(std::string(line), Not(HasSubstr(" audit=0")));
    EXPECT_THAT(std::string(line), Not(HasSubstr(" cancel=0")));
    if (absl::ConsumePrefix(&line, "time_wait_seen=")) {
      ASSERT_TRUE(absl::SimpleAtoi(line.substr(0, line.find(' ')), &time_wait_seen));
    }
  }
  // The attack was really made: closed connections sat in TIME_WAIT on the ports reused.
  EXPECT_GT(time_wait_seen, 0) << attack.out;
  EXPECT_GT(answered_as_mallory, 0) << attack.out;
  // Root's experiment survived, and the audit trail names who really tried.
  EXPECT_EQ(StateOf(root_experiment), "RUNNING");
  const CommandResult audit = daemon_->CliAsIs({"audit", "--json", "--limit", "200"});
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  EXPECT_THAT(audit.out, HasSubstr("gpuprof-mallory"));
  EXPECT_THAT(audit.out, Not(HasSubstr("\"action\":\"cancel\"")));
}

// The adversary holding connections, in the background, as mallory.
class ConnectionHoard {
 public:
  ConnectionHoard(const LocalAccount& mallory, const std::string& socket_path, int port,
                  int count, int hold_seconds)
      : status_file_(absl::StrCat(mallory.home, "/hoard-status")) {
    thread_ = std::thread([this, mallory, socket_path, port, count, hold_seconds] {
      result_ = RunCommandAs(
          mallory,
          {SharedBinary("tests/security/adversary"), "hold-connections",
           "--unix=" + socket_path, absl::StrCat("--tcp_port=", port),
           absl::StrCat("--count=", count), absl::StrCat("--hold_seconds=", hold_seconds),
           "--status_file=" + status_file_},
          absl::Seconds(hold_seconds + 120));
    });
  }
  ~ConnectionHoard() {
    if (thread_.joinable()) thread_.join();
  }
  // Waits until the hoard is settled; returns "holding admitted=A refused=R".
  std::string WaitHolding() {
    const absl::Time deadline = absl::Now() + absl::Seconds(120);
    while (absl::Now() < deadline) {
      std::ifstream file(status_file_);
      std::string line;
      if (std::getline(file, line) && absl::StartsWith(line, "holding")) return line;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return "";
  }
  CommandResult Finish() {
    thread_.join();
    return result_;
  }

 private:
  std::string status_file_;
  std::thread thread_;
  CommandResult result_;
};

int FieldOf(const std::string& text, const std::string& key) {
  const size_t at = text.find(key + "=");
  int value = -1;
  if (at == std::string::npos) return value;
  absl::string_view rest = absl::string_view(text).substr(at + key.size() + 1);
  rest = rest.substr(0, rest.find_first_of(" \n"));
  absl::SimpleAtoi(rest, &value);
  return value;
}

// The victim's health, cancel and watch, each timed, while mallory holds the box's places.
void ExpectVictimServed(SharedBoxTest* test, DaemonProcess& daemon, const LocalAccount& alice,
                        const std::string& experiment) {
  struct Step {
    std::string name;
    std::vector<std::string> args;
  };
  for (const Step& step :
       {Step{"health", {"health"}}, Step{"cancel", {"cancel", experiment}},
        Step{"watch", {"watch", experiment, "--json"}}}) {
    const absl::Time start = absl::Now();
    const CommandResult result = daemon.CliAs(alice, step.args);
    const absl::Duration took = absl::Now() - start;
    EXPECT_EQ(result.exit_code, step.name == "watch" ? 1 : 0)
        << step.name << ": " << result.out << result.err;
    EXPECT_LT(took, kAnsweredWithin) << step.name << " took " << took;
    std::printf("victim %s answered in %s during the flood\n", step.name.c_str(),
                absl::FormatDuration(took).c_str());
  }
}

// Finding 3: every place taken by one account's idle connections made root's health fail
// for the whole attack. Now the flooder's own connections are evicted to make room.
TEST_F(SharedBoxTest, AConnectionFloodEvictsTheFlooderNotTheVictim) {
  StartDaemon({"--max_connections=120", "--max_connections_per_user=0",
               "--reserved_local_connections=16", "--handshake_timeout=10m"});
  const std::string experiment = SubmitHangingAs(alice_);
  ASSERT_FALSE(experiment.empty());
  ConnectionHoard hoard(mallory_, std::string(absl::StripPrefix(daemon_->target(), "unix:")),
                        port_, 300, 15);
  const std::string holding = hoard.WaitHolding();
  ASSERT_FALSE(holding.empty()) << "the hoard never settled";
  // Every place is mallory's (less the daemon's own probe, if still open).
  EXPECT_GE(FieldOf(holding, "admitted"), 110) << holding;
  EXPECT_GE(FieldOf(holding, "refused"), 150) << holding;
  ExpectVictimServed(this, *daemon_, alice_, experiment);
  const CommandResult hoarded = hoard.Finish();
  // The room the victim used came from the flooder.
  EXPECT_GE(FieldOf(hoarded.out, "evicted"), 1) << hoarded.out << hoarded.err << daemon_->Log();
  EXPECT_THAT(daemon_->Log(), HasSubstr("evicting the oldest connections of uid:"));
}

TEST_F(SharedBoxTest, OneAccountCannotHoldMoreThanItsShareOfConnections) {
  StartDaemon({"--max_connections_per_user=100", "--handshake_timeout=10m"});
  const std::string experiment = SubmitHangingAs(alice_);
  ASSERT_FALSE(experiment.empty());
  ConnectionHoard hoard(mallory_, std::string(absl::StripPrefix(daemon_->target(), "unix:")),
                        port_, 400, 10);
  const std::string holding = hoard.WaitHolding();
  ASSERT_FALSE(holding.empty()) << "the hoard never settled";
  EXPECT_EQ(FieldOf(holding, "admitted"), 100) << holding;
  EXPECT_EQ(FieldOf(holding, "refused"), 300) << holding;
  ExpectVictimServed(this, *daemon_, alice_, experiment);
  hoard.Finish();
  EXPECT_THAT(daemon_->Log(), HasSubstr("--max_connections_per_user"));
}

// Finding 5: the state directory was 0755 and the database 0644, so any account read the
// admin-only audit table with sqlite3.
TEST_F(SharedBoxTest, StateIsPrivateAndWideModesAreTightenedAtStart) {
  StartDaemon({});
  ASSERT_EQ(daemon_->CliAsIs({"whoami"}).exit_code, 0);
  ASSERT_EQ(daemon_->Stop(), 0);
  const std::string db = state_dir_ + "/gpuprof.db";
  EXPECT_EQ(ModeOf(state_dir_), 0700u);
  EXPECT_EQ(ModeOf(db), 0600u);
  // An operator (or an old version) left them wide open: the next start tightens them.
  ASSERT_EQ(chmod(state_dir_.c_str(), 0755), 0);
  ASSERT_EQ(chmod(db.c_str(), 0644), 0);
  ASSERT_TRUE(daemon_->Start().ok()) << daemon_->Log();
  EXPECT_THAT(daemon_->Log(), HasSubstr("had mode 0755"));
  EXPECT_THAT(daemon_->Log(), HasSubstr("had mode 0644"));
  EXPECT_EQ(ModeOf(state_dir_), 0700u);
  EXPECT_EQ(ModeOf(db), 0600u);
  for (const char* companion : {"-wal", "-shm"}) {
    if (std::filesystem::exists(db + companion)) {
      EXPECT_EQ(ModeOf(db + companion), 0600u);
    }
  }
  // Mallory reads nothing of it.
  if (std::filesystem::exists("/usr/bin/sqlite3")) {
    const CommandResult read =
        RunCommandAs(mallory_, {"/usr/bin/sqlite3", db, "select count(*) from audit"});
    EXPECT_NE(read.exit_code, 0) << read.out;
  }
  const CommandResult listed = RunCommandAs(mallory_, {"/bin/ls", state_dir_});
  EXPECT_NE(listed.exit_code, 0) << listed.out;
  // The daemon still serves mallory through its socket: private state, public service.
  EXPECT_EQ(daemon_->CliAs(mallory_, {"health"}).exit_code, 0);
}

TEST_F(SharedBoxTest, TheSocketGroupDecidesWhoMayConnect) {
  const std::string group = "gpuprof-sock";
  if (getgrnam(group.c_str()) == nullptr) {
    const CommandResult added = RunCommand({"/usr/sbin/groupadd", "--system", group});
    if (getgrnam(group.c_str()) == nullptr) {
      GTEST_SKIP() << "cannot create group " << group << ": " << added.err;
    }
  }
  RunCommand({"/usr/sbin/usermod", "-a", "-G", group, alice_.name});
  StartDaemon({"--socket_group=" + group});
  const std::string socket_path(absl::StripPrefix(daemon_->target(), "unix:"));
  EXPECT_EQ(ModeOf(socket_path), 0660u);
  const CommandResult member = daemon_->CliAs(alice_, {"health"});
  EXPECT_EQ(member.exit_code, 0) << member.err;
  const CommandResult outsider = daemon_->CliAs(mallory_, {"health"});
  EXPECT_EQ(outsider.exit_code, 3) << outsider.out << outsider.err;
}

}  // namespace
}  // namespace gpuprof::testing
