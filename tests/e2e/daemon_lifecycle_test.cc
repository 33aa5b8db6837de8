// The real gpuprofd's life cycle as a pod or a service manager sees it: SIGTERM with work and
// open streams ends within --shutdown_timeout; the health-only port answers the standard
// health protocol; SIGHUP and a changed watched file (a ConfigMap-style symlink swap) reload
// without stopping the daemon; lifecycle flags that make no sense are refused at start-up.
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "sqlite3.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Waits until the daemon's log holds `text`; the deadline is generous for a loaded machine.
bool LogShows(const DaemonProcess& daemon, const std::string& text, int times = 1) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    const std::string log = daemon.Log();
    int found = 0;
    for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) {
      ++found;
    }
    if (found >= times) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

std::string SubmitHangingRadix(const DaemonProcess& daemon) {
  const CommandResult submitted = daemon.Cli(
      {"submit", "radix", "--num-requests", "300", "--label", "gpuprof.fault=hang", "--json"});
  EXPECT_EQ(submitted.exit_code, 0) << submitted.err;
  auto events = ParseEventLines(submitted.out);
  EXPECT_TRUE(events.ok() && !events->empty()) << submitted.out;
  return events.ok() && !events->empty() ? events->front().experiment_id() : "";
}

TEST(DaemonLifecycleTest, SigtermWithWorkAndOpenStreamsEndsWellWithinTheTimeout) {
  DaemonProcess daemon(MakeTempDir("lifecycle-stop"),
                       {"--enable_test_faults", "--shutdown_timeout=20s"});
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  const std::string running = SubmitHangingRadix(daemon);
  ASSERT_FALSE(running.empty());
  // A client following the hung experiment that, unlike `gpuprof watch`, keeps its channel and
  // never collects the stream's status: the daemon's RPC grace (5 s at most) covers it.
  auto stub = daemon.NewStub();
  grpc::ClientContext watch_context;
  v1::WatchRequest watch;
  watch.set_experiment_id(running);
  auto reader = stub->Watch(&watch_context, watch);
  v1::ExperimentEvent event;
  // Wait until it runs (the worker hangs from then on).
  bool seen_running = false;
  while (!seen_running && reader->Read(&event)) {
    seen_running = event.has_state() && event.state().state() == v1::RUNNING;
  }
  ASSERT_TRUE(seen_running);
  absl::Time stream_ended;
  std::thread follower([&] {
    while (reader->Read(&event)) {
    }
    stream_ended = absl::Now();
  });

  const absl::Time start = absl::Now();
  const int status = daemon.Stop();
  const absl::Duration took = absl::Now() - start;
  follower.join();  // the stream ended with the daemon
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << daemon.Log();
  EXPECT_LT(took, absl::Seconds(20)) << daemon.Log();
  // The stream itself ends at once: the experiment is marked INTERRUPTED and its watchers told.
  EXPECT_LT(stream_ended - start, absl::Seconds(5));
  EXPECT_THAT(daemon.Log(), HasSubstr("shutting down (at most 20s)"));
  EXPECT_THAT(daemon.Log(), HasSubstr("gpuprofd: stopped"));
  RecordProperty("sigterm_to_exit_ms", absl::StrCat(absl::ToInt64Milliseconds(took)));
  RecordProperty("sigterm_to_stream_end_ms",
                 absl::StrCat(absl::ToInt64Milliseconds(stream_ended - start)));
}

// Whatever holds up the shutdown, the daemon is gone by --shutdown_timeout: here another
// process holds the database's write lock, so marking the running experiment INTERRUPTED
// waits (up to SQLite's 5 s busy timeout). The daemon exits with status 3 at the bound, and
// a restart finds the experiment and marks it INTERRUPTED: nothing lost.
TEST(DaemonLifecycleTest, AStuckShutdownStillEndsAtTheTimeout) {
  const std::string state_dir = MakeTempDir("lifecycle-stuck");
  auto daemon = std::make_unique<DaemonProcess>(
      state_dir, std::vector<std::string>{"--enable_test_faults", "--shutdown_timeout=2s"});
  ASSERT_TRUE(daemon->Start().ok()) << daemon->Log();
  const std::string running = SubmitHangingRadix(*daemon);
  ASSERT_FALSE(running.empty());
  // Wait until the store says RUNNING, so no write of the daemon's own is still pending.
  bool is_running = false;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!is_running && absl::Now() < deadline) {
    const CommandResult get = daemon->Cli({"get", running, "--json"});
    is_running = get.out.find("\"RUNNING\"") != std::string::npos;
    if (!is_running) absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(is_running) << daemon->Log();

  sqlite3* lock_holder = nullptr;
  ASSERT_EQ(sqlite3_open((state_dir + "/gpuprof.db").c_str(), &lock_holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(lock_holder, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  const absl::Time start = absl::Now();
  const int status = daemon->Stop();
  const absl::Duration took = absl::Now() - start;
  sqlite3_exec(lock_holder, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(lock_holder);

  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3) << status << "\n" << daemon->Log();
  EXPECT_THAT(daemon->Log(), HasSubstr("not stopped within --shutdown_timeout=2s; exiting now"));
  EXPECT_LT(took, absl::Seconds(30));
  RecordProperty("stuck_sigterm_to_exit_ms", absl::StrCat(absl::ToInt64Milliseconds(took)));

  daemon = std::make_unique<DaemonProcess>(state_dir,
                                           std::vector<std::string>{"--enable_test_faults"});
  ASSERT_TRUE(daemon->Start().ok()) << daemon->Log();
  const CommandResult after = daemon->Cli({"get", running, "--json"});
  EXPECT_EQ(after.exit_code, 0) << after.err;
  EXPECT_THAT(after.out, HasSubstr("\"INTERRUPTED\""));
}

TEST(DaemonLifecycleTest, HealthOnlyPortServesTheHealthProtocolInPlaintext) {
  DaemonProcess daemon(MakeTempDir("lifecycle-health"), {"--health_listen=127.0.0.1:0"});
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  std::smatch match;
  const std::string log = daemon.Log();
  ASSERT_TRUE(std::regex_search(log, match, std::regex("health-only port ([0-9]+)"))) << log;
  auto health = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", match[1].str()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(health->Check(&context, grpc::health::v1::HealthCheckRequest(), &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(daemon.Stop(), 0);
}

TEST(DaemonLifecycleTest, SighupAndAWatchedFileChangeReloadWithoutStopping) {
  const std::string state_dir = MakeTempDir("lifecycle-reload");
  // A ConfigMap volume as the kubelet lays it out: policy -> ..data/policy, ..data -> ..v1.
  const std::string mount = state_dir + "/policy-mount";
  fs::create_directories(mount + "/..v1");
  fs::create_directories(mount + "/..v2");
  // The second policy caps this user's priority at 1 and takes the daemon user's admin role.
  std::ofstream(mount + "/..v1/policy.textproto")
      << "# first\npolicy_version: 1\nend_of_policy: true\n";
  std::ofstream(mount + "/..v2/policy.textproto")
      << "policy_version: 1\n"
      << "daemon_user_is_admin: false\n"
      << "default_quota { max_priority: 1 }\n"
      << "end_of_policy: true\n";
  fs::create_directory_symlink("..v1", mount + "/..data");
  fs::create_symlink("..data/policy.textproto", mount + "/policy.textproto");

  DaemonProcess daemon(state_dir, {"--policy=" + mount + "/policy.textproto",
                                   "--reload_when_changed=" + mount + "/policy.textproto",
                                   "--reload_poll_interval=100ms"});
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  daemon.Signal(SIGHUP);
  ASSERT_TRUE(LogShows(daemon, "SIGHUP: reloading configuration", 1)) << daemon.Log();
  ASSERT_TRUE(LogShows(daemon, "policy reloaded from " + mount + "/policy.textproto", 1))
      << daemon.Log();
  const CommandResult before =
      daemon.CliAsIs({"submit", "radix", "--priority", "5", "--label", "k=v"});
  EXPECT_EQ(before.exit_code, 0) << before.err;

  fs::create_directory_symlink("..v2", mount + "/..data_tmp");
  fs::rename(mount + "/..data_tmp", mount + "/..data");
  ASSERT_TRUE(LogShows(daemon, "changed on disk: " + mount + "/policy.textproto")) << daemon.Log();
  ASSERT_TRUE(LogShows(daemon, "SIGHUP: reloading configuration", 2)) << daemon.Log();
  ASSERT_TRUE(LogShows(daemon, "policy reloaded from " + mount + "/policy.textproto", 2))
      << daemon.Log();
  // The changed file is the policy in force.
  const CommandResult after = daemon.CliAsIs({"submit", "radix", "--priority", "5"});
  EXPECT_EQ(after.exit_code, 2);
  EXPECT_THAT(after.err, HasSubstr("quota max_priority for"));
  // Still serving after both.
  EXPECT_EQ(daemon.Cli({"list"}).exit_code, 0);
  EXPECT_EQ(daemon.Stop(), 0);
}

TEST(DaemonLifecycleTest, NonsenseLifecycleFlagsAreRefusedAtStartup) {
  struct Case {
    std::string flag;
    std::string message;
  };
  for (const Case& bad : std::vector<Case>{
           {"--shutdown_timeout=0s", "--shutdown_timeout=0: must be positive"},
           {"--reload_poll_interval=-1s", "--reload_poll_interval=-1s: must be positive"},
           {"--reload_when_changed=/nonexistent/policy.textproto",
            "--reload_when_changed: /nonexistent/policy.textproto does not exist"},
       }) {
    SCOPED_TRACE(bad.flag);
    DaemonProcess daemon(MakeTempDir("lifecycle-flags"), {bad.flag});
    daemon.SpawnOnly();
    const int status = daemon.WaitForExit();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status;
    EXPECT_THAT(daemon.Log(), HasSubstr(bad.message));
  }
}

}  // namespace
}  // namespace gpuprof::testing
