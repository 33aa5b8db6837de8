// One daemon per state directory and per database. A second gpuprofd on the same files would
// mark the first one's running experiments INTERRUPTED, run its queue and wedge it; so the
// daemon holds an exclusive flock(2) on a lock file for its whole life and a second one is
// refused before it reads or writes anything. The kernel drops the lock when the holder's
// last descriptor closes, at exit or kill -9 alike, so a lock file left behind never blocks a
// restart. The file holds the holder's pid, for the refusal's message.
#ifndef GPUPROF_DAEMON_STORE_STATE_DIR_LOCK_H_
#define GPUPROF_DAEMON_STORE_STATE_DIR_LOCK_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpuprof::daemon {

class StateDirLock {
 public:
  // Takes the lock on `lock_path` without waiting, creating the file (0600, and its directory)
  // if missing, and writes this process's pid into it (on a full disk it may stay empty: the
  // lock holds all the same). `guarded` names what the lock guards in
  // messages ("state directory /var/lib/gpuprof"), `flag` the flag that chose it. When another
  // process holds it: FAILED_PRECONDITION naming that process's pid, for which
  // IsHeldByAnotherProcess() is true. The descriptor is close-on-exec: workers never hold it.
  static absl::StatusOr<StateDirLock> Acquire(const std::string& lock_path,
                                              const std::string& guarded, const std::string& flag);

  StateDirLock(StateDirLock&& other) noexcept;
  StateDirLock& operator=(StateDirLock&& other) noexcept;
  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;
  // Releases the lock. The file stays: unlinking it would let a third process lock a new file
  // while a second still holds the old one.
  ~StateDirLock();

  const std::string& path() const { return path_; }

 private:
  StateDirLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void Release();

  int fd_ = -1;
  std::string path_;
};

// Whether `status` is Acquire's refusal because another process holds the lock.
bool IsHeldByAnotherProcess(const absl::Status& status);

// The lock file of a state directory, <state_dir>/gpuprofd.lock, and of a database,
// <database>.lock: beside the file it guards, so every daemon that names the same directory
// or database, whatever its other flags, meets the same lock.
std::string StateDirLockPath(const std::string& state_dir);
std::string DatabaseLockPath(const std::string& database);

// Both locks, the state directory's first; one when they are the same file.
absl::StatusOr<std::vector<StateDirLock>> LockStateDirAndDatabase(const std::string& state_dir,
                                                                  const std::string& database);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_STORE_STATE_DIR_LOCK_H_
