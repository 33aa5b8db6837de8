#include "daemon/store/state_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace gpuprof::daemon {
namespace {

constexpr char kHeldPayloadUrl[] = "type.gpuprof/state_dir_lock_held";

// The pid the holder wrote. It writes just after taking the lock, so a file read in that
// instant is empty: read again for a moment before giving up.
std::optional<pid_t> HolderPid(int fd) {
  const absl::Time deadline = absl::Now() + absl::Milliseconds(500);
  while (true) {
    char text[32] = {};
    const ssize_t got = pread(fd, text, sizeof(text) - 1, 0);
    int pid = 0;
    if (got > 0 &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::string_view(text, got)), &pid) &&
        pid > 0) {
      return pid;
    }
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

absl::Status HeldBy(int fd, const std::string& path, const std::string& guarded,
                    const std::string& flag) {
  const std::optional<pid_t> pid = HolderPid(fd);
  const std::string holder = pid.has_value() ? absl::StrCat("another gpuprofd (pid ", *pid, ")")
                                             : "another process (its pid is not in the file)";
  absl::Status held = absl::FailedPreconditionError(absl::StrCat(
      holder, " holds the lock on ", guarded, " (", path,
      "); only one daemon may use it at a time: stop that one first, or give this one another ",
      flag));
  held.SetPayload(kHeldPayloadUrl, absl::Cord(pid.has_value() ? absl::StrCat(*pid) : ""));
  return held;
}

// Checks the open lock file, takes the lock and writes this process's pid into it.
absl::Status LockedAndStamped(int fd, const std::string& path, const std::string& guarded,
                              const std::string& flag) {
  struct stat status {};
  if (fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("lock file ", path, " of ", guarded, " is not a regular file"));
  }
  // Another account's file could be held by that account forever to keep the daemon down.
  if (status.st_uid != geteuid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "lock file ", path, " of ", guarded, " belongs to uid ", status.st_uid,
        ", not to the daemon's uid ", geteuid(), "; remove it, or choose another ", flag));
  }
  int locked;
  do {
    locked = flock(fd, LOCK_EX | LOCK_NB);
  } while (locked != 0 && errno == EINTR);
  if (locked != 0) {
    if (errno == EWOULDBLOCK) return HeldBy(fd, path, guarded, flag);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot lock ", path, " of ", guarded, ": ", strerror(errno)));
  }
  // The pid only serves a refused daemon's message: the lock holds without it, so a write
  // that fails (a full disk) is no reason not to start. Written over the last holder's in
  // place, never truncated first, so that a restart on a full disk needs no new block.
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (pwrite(fd, pid.data(), pid.size(), 0) == static_cast<ssize_t>(pid.size())) {
    (void)!ftruncate(fd, static_cast<off_t>(pid.size()));
  } else {
    (void)!ftruncate(fd, 0);  // rather no pid than an earlier holder's
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<StateDirLock> StateDirLock::Acquire(const std::string& lock_path,
                                                   const std::string& guarded,
                                                   const std::string& flag) {
  const std::filesystem::path parent = std::filesystem::path(lock_path).parent_path();
  if (!parent.empty()) {
    std::error_code ignored;  // open() below reports a directory that could not be made
    std::filesystem::create_directories(parent, ignored);
  }
  // Close-on-exec: a worker that inherited the descriptor would keep the lock after the
  // daemon died. No symbolic links: whoever could plant one could point it anywhere.
  const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot open the lock file ", lock_path,
                                                      " of ", guarded, ": ", strerror(errno),
                                                      " (check ", flag, ")"));
  }
  absl::Status usable = LockedAndStamped(fd, lock_path, guarded, flag);
  if (!usable.ok()) {
    // Not ours: close without touching the holder's pid.
    close(fd);
    return usable;
  }
  return StateDirLock(fd, lock_path);
}

StateDirLock::StateDirLock(StateDirLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

StateDirLock& StateDirLock::operator=(StateDirLock&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

StateDirLock::~StateDirLock() { Release(); }

void StateDirLock::Release() {
  if (fd_ < 0) return;
  // Closing the last descriptor releases the lock. The pid stays, as after kill -9: it is read
  // only while someone holds the lock, who has written their own by then.
  close(fd_);
  fd_ = -1;
}

bool IsHeldByAnotherProcess(const absl::Status& status) {
  return status.GetPayload(kHeldPayloadUrl).has_value();
}

std::string StateDirLockPath(const std::string& state_dir) {
  return (std::filesystem::path(state_dir) / "gpuprofd.lock").string();
}

std::string DatabaseLockPath(const std::string& database) { return database + ".lock"; }

absl::StatusOr<std::vector<StateDirLock>> LockStateDirAndDatabase(const std::string& state_dir,
                                                                  const std::string& database) {
  std::vector<StateDirLock> locks;
  absl::StatusOr<StateDirLock> directory = StateDirLock::Acquire(
      StateDirLockPath(state_dir), absl::StrCat("state directory ", state_dir), "--state_dir");
  if (!directory.ok()) return directory.status();
  locks.push_back(*std::move(directory));
  // A second flock on the same file from this process would conflict with the first.
  std::error_code error;
  if (std::filesystem::equivalent(locks.front().path(), DatabaseLockPath(database), error)) {
    return locks;
  }
  absl::StatusOr<StateDirLock> file = StateDirLock::Acquire(
      DatabaseLockPath(database), absl::StrCat("database ", database), "--db");
  if (!file.ok()) return file.status();
  locks.push_back(*std::move(file));
  return locks;
}

}  // namespace gpuprof::daemon
