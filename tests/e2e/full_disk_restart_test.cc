// A restart on a full disk, against the real gpuprofd: its database on an 8 MiB tmpfs in a
// private mount namespace, filled up while the daemon is down (killed with -9 while an
// experiment ran, so start-up owes a write). The daemon starts all the same, serves list, get
// and watch of what is stored, refuses a submit saying to free space, and says it serves reads
// only (log, health, metrics); once space is freed it writes what it owed and takes work again
// by itself, without a restart.
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/write_health.h"
#include "gmock/gmock.h"
#include "gpuprof/v1/profiler.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/metrics/http_client.h"
#include "tests/testing/daemon_harness.h"
#include "tests/testing/private_tmpfs.h"

namespace gpuprof::testing {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::testing::HasSubstr;

// Submits through the API and returns the acknowledged id, or the refusal.
absl::StatusOr<std::string> Submit(v1::Profiler::Stub& stub, v1::ExperimentRequest request) {
  request.set_user("tester");
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub.Submit(&context, request);
  v1::ExperimentEvent first;
  if (stream->Read(&first)) {
    context.TryCancel();
    stream->Finish().IgnoreError();
    return first.experiment_id();
  }
  const grpc::Status status = stream->Finish();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

v1::ExperimentRequest SmallRadix() {
  v1::ExperimentRequest request;
  request.mutable_radix()->set_num_requests(300);
  return request;
}

absl::StatusOr<v1::Experiment> Get(v1::Profiler::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::GetExperimentRequest request;
  request.set_experiment_id(id);
  v1::Experiment experiment;
  const grpc::Status status = stub.GetExperiment(&context, request, &experiment);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  return experiment;
}

// The state the store holds (ListExperiments reads the database, not the daemon's memory).
v1::ExperimentState StoredState(v1::Profiler::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  v1::ListExperimentsRequest request;
  v1::ListExperimentsResponse response;
  if (!stub.ListExperiments(&context, request, &response).ok()) return v1::EXPERIMENT_STATE_UNSPECIFIED;
  for (const v1::Experiment& experiment : response.experiments()) {
    if (experiment.id() == id) return experiment.state();
  }
  return v1::EXPERIMENT_STATE_UNSPECIFIED;
}

bool WaitForState(v1::Profiler::Stub& stub, const std::string& id, v1::ExperimentState state) {
  const absl::Time deadline = absl::Now() + absl::Minutes(1);
  while (absl::Now() < deadline) {
    auto experiment = Get(stub, id);
    if (experiment.ok() && experiment->state() == state) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

// What the daemon's "writes" health service says (NOT_FOUND and the like: SERVICE_UNKNOWN).
HealthCheckResponse::ServingStatus WritesHealth(const DaemonProcess& daemon) {
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(daemon.target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  HealthCheckRequest request;
  request.set_service(kWritesHealthService);
  HealthCheckResponse response;
  if (!health->Check(&context, request, &response).ok()) return HealthCheckResponse::SERVICE_UNKNOWN;
  return response.status();
}

// Scrapes the daemon's /metrics until the body holds `line`; the body last scraped.
std::string ScrapeUntil(const DaemonProcess& daemon, const std::string& line) {
  const std::string log = daemon.Log();
  const std::string marker = "metrics on http://127.0.0.1:";
  const size_t at = log.rfind(marker);
  int port = 0;
  if (at == std::string::npos ||
      !absl::SimpleAtoi(log.substr(at + marker.size(),
                                   log.find('/', at + marker.size()) - at - marker.size()),
                        &port)) {
    ADD_FAILURE() << "no metrics port in the log:\n" << log;
    return "";
  }
  std::string body;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    auto scraped = HttpGet(port, "/metrics");
    if (scraped.ok()) body = scraped->body;
    if (body.find(line) != std::string::npos) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return body;
}

// Checkpoints the database's WAL and truncates it, keeping the WAL files as gpuprofd does.
void EmptyWal(const std::string& db_path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  int keep = 1;
  ASSERT_EQ(sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL, &keep), SQLITE_OK);
  // A connection finds the WAL when it first reads.
  ASSERT_EQ(sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_wal_checkpoint_v2(db, "main", SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  ASSERT_EQ(std::filesystem::file_size(db_path + "-wal"), 0u);
}

TEST(FullDiskRestartTest, StartsServesReadsRefusesWritesAndRecoversOnceSpaceIsFreed) {
  const char* small_disk = std::getenv(kPrivateTmpfsEnv);
  if (small_disk == nullptr) {
    std::string why;
    const int exit_code = RerunInPrivateTmpfs(
        "FullDiskRestartTest.StartsServesReadsRefusesWritesAndRecoversOnceSpaceIsFreed",
        MakeTempDir("small-disk"), "8m", why);
    if (exit_code == kNoPrivateTmpfs) {
      // Root can always mount (CI runs as root): there, not mounting is a failure.
      if (geteuid() == 0) FAIL() << "root could not mount a private tmpfs: " << why;
      GTEST_SKIP() << "no private tmpfs on this machine (" << why
                   << "): it needs user namespaces, or root";
    }
    ASSERT_EQ(exit_code, 0) << "the test failed inside its mount namespace; see its output above";
    return;
  }

  // The database (and its lock file) on the small disk; the daemon's log and socket elsewhere,
  // so that the test can read the log while the disk is full.
  const std::string db_path = std::string(small_disk) + "/gpuprof.db";
  const std::string filler = std::string(small_disk) + "/filler";
  const std::string state_dir = MakeTempDir("state");
  const std::vector<std::string> flags = {"--db=" + db_path, "--enable_test_faults",
                                          "--metrics_listen=127.0.0.1:0"};
  auto daemon = std::make_unique<DaemonProcess>(state_dir, flags);
  ASSERT_TRUE(daemon->Start().ok()) << daemon->Log();
  auto stub = daemon->NewStub();
  auto finished = Submit(*stub, SmallRadix());
  ASSERT_TRUE(finished.ok()) << finished.status();
  ASSERT_TRUE(WaitForState(*stub, *finished, v1::FINISHED)) << daemon->Log();
  // Running (its worker hangs on purpose) when the daemon dies: start-up owes it a write.
  v1::ExperimentRequest hanging = SmallRadix();
  (*hanging.mutable_labels())["gpuprof.fault"] = "hang";
  auto running = Submit(*stub, hanging);
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_TRUE(WaitForState(*stub, *running, v1::RUNNING)) << daemon->Log();
  daemon->KillHard();
  // The WAL emptied into the database, as the daemon's own checkpoints do: no space it held is
  // left to write in once the disk is full.
  EmptyWal(db_path);

  ASSERT_TRUE(FillFilesystem(filler));
  daemon = std::make_unique<DaemonProcess>(state_dir, flags);
  const absl::Status started = daemon->Start();
  ASSERT_TRUE(started.ok()) << started << "\n" << daemon->Log();
  stub = daemon->NewStub();
  EXPECT_THAT(daemon->Log(), HasSubstr(absl::StrCat("the disk holding ", db_path,
                                                    " is full: serving reads only")));

  // Reads: get, list and watch of what is stored.
  const CommandResult got = daemon->Cli({"get", *finished, "--json"});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  auto experiment = ParseExperiment(got.out);
  ASSERT_TRUE(experiment.ok()) << experiment.status();
  EXPECT_EQ(experiment->state(), v1::FINISHED);
  const CommandResult listed = daemon->Cli({"list"});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr(*finished));
  EXPECT_THAT(listed.out, HasSubstr(*running));
  const CommandResult watched = daemon->Cli({"watch", *finished, "--json"});
  ASSERT_EQ(watched.exit_code, 0) << watched.err;
  auto events = ParseEventLines(watched.out);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_FALSE(events->empty());
  EXPECT_EQ(events->back().state().state(), v1::FINISHED);
  // The experiment that was running is INTERRUPTED, in memory until the disk takes the write.
  auto interrupted = Get(*stub, *running);
  ASSERT_TRUE(interrupted.ok()) << interrupted.status();
  EXPECT_EQ(interrupted->state(), v1::INTERRUPTED);

  // Writes: refused, saying what to do.
  const absl::StatusOr<std::string> refused = Submit(*stub, SmallRadix());
  ASSERT_FALSE(refused.ok()) << "a submit was acknowledged on a full disk";
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  const CommandResult cli_submit = daemon->Cli({"submit", "radix", "--num-requests", "300"});
  EXPECT_NE(cli_submit.exit_code, 0);
  EXPECT_THAT(cli_submit.err, HasSubstr("RESOURCE_EXHAUSTED"));
  EXPECT_THAT(cli_submit.err, HasSubstr("free space there"));

  // Health and metrics say the daemon serves reads only.
  EXPECT_EQ(WritesHealth(*daemon), HealthCheckResponse::NOT_SERVING);
  const CommandResult health = daemon->Cli({"health"});
  EXPECT_NE(health.exit_code, 0);
  EXPECT_THAT(health.out, HasSubstr("SERVING reads only: writes NOT_SERVING"));
  const std::string metrics = ScrapeUntil(*daemon, "gpuprof_store_read_only 1");
  EXPECT_THAT(metrics, HasSubstr("gpuprof_store_read_only 1"));
  EXPECT_THAT(metrics, HasSubstr("gpuprof_store_disk_free_bytes "));

  // A database that does not exist yet cannot be created there: a second daemon on a new
  // database exits (1, as for any start-up failure) saying to free space.
  DaemonProcess fresh(MakeTempDir("fresh-state"),
                      {"--db=" + std::string(small_disk) + "/fresh/gpuprof.db"});
  fresh.SpawnOnly();
  const int status = fresh.WaitForExit();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status << fresh.Log();
  EXPECT_THAT(fresh.Log(), HasSubstr("not starting"));
  EXPECT_THAT(fresh.Log(), HasSubstr("free space there and start gpuprofd again"));

  // Space comes back: the daemon notices by itself, stores what start-up owed, takes work.
  ASSERT_TRUE(std::filesystem::remove(filler));
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (WritesHealth(*daemon) != HealthCheckResponse::SERVING && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(WritesHealth(*daemon), HealthCheckResponse::SERVING) << daemon->Log();
  EXPECT_THAT(daemon->Log(), HasSubstr(" takes writes again"));
  const CommandResult healthy = daemon->Cli({"health"});
  EXPECT_EQ(healthy.exit_code, 0) << healthy.out;
  auto after = Submit(*stub, SmallRadix());
  ASSERT_TRUE(after.ok()) << after.status() << "\n" << daemon->Log();
  EXPECT_TRUE(WaitForState(*stub, *after, v1::FINISHED)) << daemon->Log();
  EXPECT_EQ(StoredState(*stub, *running), v1::INTERRUPTED);
  EXPECT_THAT(ScrapeUntil(*daemon, "gpuprof_store_read_only 0"),
              HasSubstr("gpuprof_store_read_only 0"));
}

}  // namespace
}  // namespace gpuprof::testing
