// The state directory's lock between real processes: forked children hold or ask for it, and
// one is killed with SIGKILL as a crashed daemon would be.
#include "daemon/store/state_dir_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace gpuprof::daemon {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// A child process that runs `body` and reports what it wrote to a pipe; the parent reads it.
struct Child {
  pid_t pid = -1;
  int from_child = -1;

  std::string ReadLine() const {
    std::string line;
    char c;
    while (read(from_child, &c, 1) == 1 && c != '\n') line += c;
    return line;
  }
  // Waits for the child's exit and returns its exit code (-1 if it was killed).
  int Wait() {
    int status = 0;
    waitpid(pid, &status, 0);
    close(from_child);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  void KillHard() {
    kill(pid, SIGKILL);
    Wait();
  }
};

// `body` gets the pipe to write to and returns the child's exit code.
template <typename Body>
Child Fork(Body body) {
  int pipe_fds[2];
  EXPECT_EQ(pipe(pipe_fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    _exit(body(pipe_fds[1]));
  }
  close(pipe_fds[1]);
  return Child{pid, pipe_fds[0]};
}

void WriteLine(int fd, const std::string& text) {
  const std::string line = text + "\n";
  (void)!write(fd, line.data(), line.size());
}

class StateDirLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  absl::StatusOr<StateDirLock> Lock() const {
    return StateDirLock::Acquire(lock_path(), "state directory " + dir_, "--state_dir");
  }
  std::string lock_path() const { return StateDirLockPath(dir_); }

  std::string dir_;
};

TEST_F(StateDirLockTest, TheHolderWritesItsPidAndReleasingFreesTheLock) {
  {
    auto lock = Lock();
    ASSERT_TRUE(lock.ok()) << lock.status();
    EXPECT_EQ(lock->path(), dir_ + "/gpuprofd.lock");
    EXPECT_EQ(ReadFile(lock_path()), absl::StrCat(getpid(), "\n"));
    EXPECT_EQ(fs::status(lock_path()).permissions() & fs::perms::all,
              fs::perms::owner_read | fs::perms::owner_write);
  }
  // Released: the file stays (see the header) and the lock is free.
  EXPECT_TRUE(fs::exists(lock_path()));
  EXPECT_TRUE(Lock().ok());
}

TEST_F(StateDirLockTest, ASecondProcessIsRefusedNamingTheHoldersPidAndTheDirectory) {
  auto held = Lock();
  ASSERT_TRUE(held.ok()) << held.status();
  Child child = Fork([&](int to_parent) {
    const absl::StatusOr<StateDirLock> second = Lock();
    WriteLine(to_parent, second.ok() ? "acquired" : std::string(second.status().message()));
    return !second.ok() && IsHeldByAnotherProcess(second.status()) ? 0 : 1;
  });
  const std::string message = child.ReadLine();
  EXPECT_EQ(child.Wait(), 0) << message;
  EXPECT_THAT(message, HasSubstr(absl::StrCat("another gpuprofd (pid ", getpid(), ")")));
  EXPECT_THAT(message, HasSubstr("state directory " + dir_));
  EXPECT_THAT(message, HasSubstr(lock_path()));
  EXPECT_THAT(message, HasSubstr("another --state_dir"));
  // The refused process left the holder's pid in place.
  EXPECT_EQ(ReadFile(lock_path()), absl::StrCat(getpid(), "\n"));
}

TEST_F(StateDirLockTest, ALockWhoseHolderWasKilledIsFreeAgainAndItsStalePidReplaced) {
  Child holder = Fork([&](int to_parent) {
    absl::StatusOr<StateDirLock> lock = Lock();
    WriteLine(to_parent, lock.ok() ? "held" : std::string(lock.status().message()));
    pause();  // until killed, like a daemon at work
    return 0;
  });
  ASSERT_EQ(holder.ReadLine(), "held");
  const absl::StatusOr<StateDirLock> refused = Lock();
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(IsHeldByAnotherProcess(refused.status()));
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr(absl::StrCat("another gpuprofd (pid ", holder.pid, ")")));

  const pid_t killed = holder.pid;
  holder.KillHard();
  // kill -9 left the file with the dead holder's pid; the kernel released the lock.
  EXPECT_EQ(ReadFile(lock_path()), absl::StrCat(killed, "\n"));
  auto lock = Lock();
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_EQ(ReadFile(lock_path()), absl::StrCat(getpid(), "\n"));
}

TEST_F(StateDirLockTest, AStaleLockFileFromAnEarlierRunDoesNotBlock) {
  // A longer pid than ours: what is left of it after ours must go too.
  std::ofstream(lock_path()) << "4194303999\n";
  auto lock = Lock();
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_EQ(ReadFile(lock_path()), absl::StrCat(getpid(), "\n"));
}

TEST_F(StateDirLockTest, AProcessStartedWhileTheLockIsHeldDoesNotKeepIt) {
  auto lock = std::make_unique<absl::StatusOr<StateDirLock>>(Lock());
  ASSERT_TRUE(lock->ok()) << lock->status();
  // As the daemon starts a worker: fork and exec. The pipe's write end is close-on-exec too,
  // so the parent reads its end of file once the child has exec'd.
  int exec_done[2];
  ASSERT_EQ(pipe2(exec_done, O_CLOEXEC), 0);
  const pid_t worker = fork();
  if (worker == 0) {
    execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(worker, 0);
  close(exec_done[1]);
  char ignored;
  ASSERT_EQ(read(exec_done[0], &ignored, 1), 0);
  close(exec_done[0]);
  lock.reset();
  // Had the worker inherited the descriptor, it would hold the lock still.
  const absl::StatusOr<StateDirLock> again = Lock();
  EXPECT_TRUE(again.ok()) << again.status();
  kill(worker, SIGKILL);
  waitpid(worker, nullptr, 0);
}

TEST_F(StateDirLockTest, ASymbolicLinkInPlaceOfTheLockFileIsRefused) {
  std::ofstream(dir_ + "/elsewhere") << "";
  fs::create_symlink(dir_ + "/elsewhere", lock_path());
  const absl::StatusOr<StateDirLock> lock = Lock();
  ASSERT_FALSE(lock.ok());
  EXPECT_FALSE(IsHeldByAnotherProcess(lock.status()));
  EXPECT_THAT(std::string(lock.status().message()),
              HasSubstr("cannot open the lock file " + lock_path()));
}

TEST_F(StateDirLockTest, ADatabaseElsewhereIsLockedBesideItSoOtherStateDirsMeetTheSameLock) {
  const std::string database = dir_ + "/shared/gpuprof.db";
  auto first = LockStateDirAndDatabase(dir_ + "/a", database);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ((*first)[0].path(), dir_ + "/a/gpuprofd.lock");
  EXPECT_EQ((*first)[1].path(), database + ".lock");

  // Another state directory on the same database is refused in another process, naming --db.
  Child child = Fork([&](int to_parent) {
    const auto second = LockStateDirAndDatabase(dir_ + "/b", database);
    WriteLine(to_parent, second.ok() ? "acquired" : std::string(second.status().message()));
    return !second.ok() && IsHeldByAnotherProcess(second.status()) ? 0 : 1;
  });
  const std::string message = child.ReadLine();
  EXPECT_EQ(child.Wait(), 0) << message;
  EXPECT_THAT(message, HasSubstr("the lock on database " + database));
  EXPECT_THAT(message, HasSubstr("another --db"));

  // The same state directory with another database is refused on the directory's lock.
  Child other = Fork([&](int to_parent) {
    const auto second = LockStateDirAndDatabase(dir_ + "/a", dir_ + "/other.db");
    WriteLine(to_parent, second.ok() ? "acquired" : std::string(second.status().message()));
    return !second.ok() && IsHeldByAnotherProcess(second.status()) ? 0 : 1;
  });
  const std::string refused = other.ReadLine();
  EXPECT_EQ(other.Wait(), 0) << refused;
  EXPECT_THAT(refused, HasSubstr("the lock on state directory " + dir_ + "/a"));
  // The refused process released the directory's lock it never got and made no database lock.
  EXPECT_FALSE(fs::exists(dir_ + "/other.db.lock"));
}

}  // namespace
}  // namespace gpuprof::daemon
