// Storage faults against the real gpuprofd: a database that is damaged or another
// application's (refusal to start, `gpuprofd --check-db`), and a disk that fills up while the
// daemon runs (its database on a 16 MiB tmpfs in a private mount namespace).
#include <fcntl.h>
#include <sched.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpuprof/v1/profiler.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_harness.h"

extern char** environ;

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

// Submits through the API and returns the acknowledgement: the stored QUEUED event's id, or
// the refusal.
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

// Polls until the experiment is in `state`; false after two minutes.
bool WaitForState(v1::Profiler::Stub& stub, const std::string& id, v1::ExperimentState state) {
  const absl::Time deadline = absl::Now() + absl::Minutes(2);
  while (absl::Now() < deadline) {
    auto experiment = Get(stub, id);
    if (experiment.ok() && experiment->state() == state) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

CommandResult CheckDb(const std::string& db_path) {
  return RunCommand({RunfilePath("daemon/gpuprofd"), "--check-db", "--db=" + db_path});
}

TEST(DatabaseFaultsTest, DamagedDatabaseIsNeverReplacedAndCheckDbSaysSo) {
  const std::string state_dir = MakeTempDir("damaged");
  const std::string db_path = state_dir + "/gpuprof.db";
  std::string acknowledged;
  {
    DaemonProcess daemon(state_dir);
    ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
    auto stub = daemon.NewStub();
    auto id = Submit(*stub, SmallRadix());
    ASSERT_TRUE(id.ok()) << id.status();
    acknowledged = *id;
    ASSERT_TRUE(WaitForState(*stub, acknowledged, v1::FINISHED)) << daemon.Log();
    daemon.Stop();
  }
  const CommandResult intact = CheckDb(db_path);
  EXPECT_EQ(intact.exit_code, 0) << intact.err;
  EXPECT_THAT(intact.out, HasSubstr("intact"));
  EXPECT_THAT(intact.out, HasSubstr("1 experiments"));

  // Garbage over the file's header: the file is no longer recognisable as a database.
  {
    std::fstream file(db_path, std::ios::in | std::ios::out | std::ios::binary);
    const std::string garbage(100, '\x5a');
    file.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  const std::string damaged_bytes = ReadFile(db_path);
  DaemonProcess daemon(state_dir);
  const absl::Status started = daemon.Start();
  ASSERT_FALSE(started.ok()) << "gpuprofd started on a damaged database";
  EXPECT_THAT(daemon.Log(), HasSubstr("not starting"));
  EXPECT_THAT(daemon.Log(), HasSubstr(db_path));
  EXPECT_THAT(daemon.Log(), HasSubstr("--check-db"));
  // The file is left exactly as it was: never replaced by an empty database.
  EXPECT_EQ(ReadFile(db_path), damaged_bytes);

  const CommandResult check = CheckDb(db_path);
  EXPECT_EQ(check.exit_code, 1);
  EXPECT_THAT(check.err, HasSubstr("damaged"));
  EXPECT_THAT(check.err, HasSubstr(db_path));
}

TEST(DatabaseFaultsTest, AnotherApplicationsDatabaseIsRefused) {
  const std::string state_dir = MakeTempDir("foreign");
  const std::string db_path = state_dir + "/other.db";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE invoices (id INTEGER)", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);

  DaemonProcess daemon(state_dir, {"--db=" + db_path});
  ASSERT_FALSE(daemon.Start().ok()) << "gpuprofd started on another application's database";
  EXPECT_THAT(daemon.Log(), HasSubstr("another application"));
  const CommandResult check = CheckDb(db_path);
  EXPECT_EQ(check.exit_code, 1);
  EXPECT_THAT(check.err, HasSubstr("another application"));
}

// Set in the child that runs the full-disk test inside its private mount namespace: the path
// where the small tmpfs is mounted.
constexpr char kSmallFilesystemEnv[] = "GPUPROF_TEST_SMALL_FILESYSTEM";

// Runs `test_name` again in a child with a private mount namespace (plus a user namespace
// unless root) where a 16 MiB tmpfs is mounted at `mount_point`. Returns the child's exit code,
// or 77 with `why` set when namespaces or the mount are not available here.
int RunWithSmallFilesystem(const std::string& test_name, const std::string& mount_point,
                           std::string& why) {
  // Everything the child needs is prepared before fork: after it, only system calls.
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  const std::string uid_map = absl::StrCat("0 ", uid, " 1\n");
  const std::string gid_map = absl::StrCat("0 ", gid, " 1\n");
  const std::string filter = "--gtest_filter=" + test_name;
  std::vector<std::string> env_strings;
  for (char** entry = environ; *entry != nullptr; ++entry) env_strings.push_back(*entry);
  env_strings.push_back(absl::StrCat(kSmallFilesystemEnv, "=", mount_point));
  std::vector<char*> envp;
  for (std::string& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  char* const argv[] = {const_cast<char*>(self.c_str()), const_cast<char*>(filter.c_str()),
                        nullptr};

  int reasons[2];
  if (pipe2(reasons, O_CLOEXEC) != 0) {
    why = "pipe failed";
    return 77;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    auto fail = [&](const char* what) {
      const int error = errno;
      (void)!write(reasons[1], what, strlen(what));
      (void)!write(reasons[1], ": ", 2);
      (void)!write(reasons[1], strerror(error), strlen(strerror(error)));
      _exit(77);
    };
    auto write_file = [&](const char* path, const std::string& text) {
      const int fd = open(path, O_WRONLY);
      if (fd < 0 || write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
        fail(path);
      }
      close(fd);
    };
    if (unshare(CLONE_NEWNS | (uid == 0 ? 0 : CLONE_NEWUSER)) != 0) {
      fail(uid == 0 ? "unshare(CLONE_NEWNS)" : "unshare(CLONE_NEWUSER | CLONE_NEWNS)");
    }
    if (uid != 0) {
      write_file("/proc/self/setgroups", "deny");
      write_file("/proc/self/uid_map", uid_map);
      write_file("/proc/self/gid_map", gid_map);
    }
    // The tmpfs must stay in this namespace, never propagate to the host's.
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      fail("making the mounts private");
    }
    if (mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=16m") != 0) fail("mount tmpfs");
    execve(argv[0], argv, envp.data());
    fail("execve");
  }
  close(reasons[1]);
  char buffer[512];
  const ssize_t n = read(reasons[0], buffer, sizeof(buffer));
  close(reasons[0]);
  if (n > 0) why.assign(buffer, static_cast<size_t>(n));
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Writes zeros to `path` until the file system has no space left.
void FillFilesystem(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0) << strerror(errno);
  const std::string block(4096, '\0');
  while (write(fd, block.data(), block.size()) > 0) {
  }
  EXPECT_EQ(errno, ENOSPC);
  close(fd);
}

TEST(DiskFullTest, SubmitIsRefusedNothingAcknowledgedIsLostAndTheDaemonRecovers) {
  const char* small_filesystem = std::getenv(kSmallFilesystemEnv);
  if (small_filesystem == nullptr) {
    const std::string mount_point = MakeTempDir("small-filesystem");
    std::string why;
    const int exit_code = RunWithSmallFilesystem(
        "DiskFullTest.SubmitIsRefusedNothingAcknowledgedIsLostAndTheDaemonRecovers", mount_point,
        why);
    if (exit_code == 77) {
      GTEST_SKIP() << "no private tmpfs for the full-disk test on this machine (" << why
                   << "): it needs user namespaces, or root";
    }
    ASSERT_EQ(exit_code, 0) << "the test failed inside its mount namespace; see its output above";
    return;
  }

  // The database lives on the 16 MiB tmpfs; the daemon's log and socket do not.
  const std::string db_path = std::string(small_filesystem) + "/gpuprof.db";
  const std::string filler = std::string(small_filesystem) + "/filler";
  const std::string state_dir = MakeTempDir("state");
  const std::vector<std::string> flags = {"--db=" + db_path, "--enable_test_faults"};
  auto daemon = std::make_unique<DaemonProcess>(state_dir, flags);
  ASSERT_TRUE(daemon->Start().ok()) << daemon->Log();
  auto stub = daemon->NewStub();

  std::vector<std::string> acknowledged;
  auto finished = Submit(*stub, SmallRadix());
  ASSERT_TRUE(finished.ok()) << finished.status();
  acknowledged.push_back(*finished);
  ASSERT_TRUE(WaitForState(*stub, *finished, v1::FINISHED)) << daemon->Log();

  // One experiment runs (its worker hangs on purpose) while the disk fills up.
  v1::ExperimentRequest hanging = SmallRadix();
  (*hanging.mutable_labels())["gpuprof.fault"] = "hang";
  auto running = Submit(*stub, hanging);
  ASSERT_TRUE(running.ok()) << running.status();
  acknowledged.push_back(*running);
  ASSERT_TRUE(WaitForState(*stub, *running, v1::RUNNING)) << daemon->Log();

  FillFilesystem(filler);
  // Submissions now fail, with a clear error. Some may still fit in the space SQLite's
  // write-ahead log already holds (up to its checkpoint size); those are acknowledged, and
  // must survive like any other.
  absl::Status refusal;
  for (int attempt = 0; attempt < 2000 && refusal.ok(); ++attempt) {
    auto id = Submit(*stub, SmallRadix());
    if (id.ok()) {
      acknowledged.push_back(*id);
    } else {
      refusal = id.status();
    }
  }
  ASSERT_FALSE(refusal.ok()) << "every submission succeeded on a full disk";
  EXPECT_EQ(refusal.code(), absl::StatusCode::kResourceExhausted) << refusal;
  EXPECT_THAT(refusal.message(), HasSubstr("not queued"));
  EXPECT_THAT(refusal.message(), HasSubstr("full"));
  const CommandResult cli = daemon->Cli({"submit", "radix", "--num-requests", "300"});
  EXPECT_NE(cli.exit_code, 0);
  EXPECT_THAT(cli.err, HasSubstr("full"));

  // The running experiment ends cleanly although its final state cannot be written yet.
  {
    grpc::ClientContext context;
    v1::CancelRequest cancel;
    cancel.set_experiment_id(*running);
    v1::Experiment cancelled;
    ASSERT_TRUE(stub->Cancel(&context, cancel, &cancelled).ok());
    EXPECT_EQ(cancelled.state(), v1::CANCELLED);
  }
  EXPECT_TRUE(WaitForState(*stub, *running, v1::CANCELLED));

  // Space returns: the daemon stores what waited and accepts work again by itself.
  ASSERT_TRUE(std::filesystem::remove(filler));
  absl::StatusOr<std::string> after;
  const absl::Time deadline = absl::Now() + absl::Minutes(1);
  // Ahead of whatever queued while the disk was full.
  v1::ExperimentRequest urgent = SmallRadix();
  urgent.set_priority(10);
  do {
    after = Submit(*stub, urgent);
    if (!after.ok()) absl::SleepFor(absl::Milliseconds(200));
  } while (!after.ok() && absl::Now() < deadline);
  ASSERT_TRUE(after.ok()) << after.status() << "\n" << daemon->Log();
  acknowledged.push_back(*after);
  EXPECT_TRUE(WaitForState(*stub, *after, v1::FINISHED)) << daemon->Log();

  // After a restart every acknowledged experiment is there, and the cancellation that waited
  // for the disk was stored.
  daemon->Stop();
  daemon = std::make_unique<DaemonProcess>(state_dir, flags);
  ASSERT_TRUE(daemon->Start().ok()) << daemon->Log();
  stub = daemon->NewStub();
  for (const std::string& id : acknowledged) {
    auto experiment = Get(*stub, id);
    EXPECT_TRUE(experiment.ok()) << id << ": " << experiment.status();
  }
  auto cancelled = Get(*stub, *running);
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->state(), v1::CANCELLED);
  auto first = Get(*stub, acknowledged.front());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->state(), v1::FINISHED);
  const CommandResult check = CheckDb(db_path);
  EXPECT_EQ(check.exit_code, 0) << check.err;
}

}  // namespace
}  // namespace gpuprof::testing
