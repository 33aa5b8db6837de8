// Watches the disk under the experiment store. A full disk makes the store read-only: what
// is stored is served, writes are refused with ResourceExhausted saying to free space. While
// it is read-only a small write is tried every interval, and the first that commits ends it,
// with no restart. Meanwhile the free space of the database's file system is sampled for a
// metric, and, while writable, the WAL is checkpointed and emptied now and then so that it
// holds no more of a small volume than it must.
#ifndef GPUPROF_DAEMON_STORE_STORE_SPACE_MONITOR_H_
#define GPUPROF_DAEMON_STORE_STORE_SPACE_MONITOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/store/experiment_store.h"

namespace gpuprof::daemon {

// Bytes an unprivileged writer may still use on the file system holding `path` (a file or a
// directory; statvfs of its directory).
absl::StatusOr<int64_t> FreeBytesOnDiskHolding(const std::string& path);

// The line logged when the store becomes read-only: what happened, what is served, what to do.
std::string DiskFullMessage(const std::string& database_path);

class StoreSpaceMonitor {
 public:
  struct Options {
    // How often free space is sampled and, while read-only, a write is tried.
    absl::Duration interval = absl::Seconds(1);
    // How often the WAL is emptied (TRUNCATE checkpoint) while the store is writable.
    absl::Duration checkpoint_interval = absl::Seconds(30);
    // Called when read-only mode begins or ends (from Start, then from the monitor's thread).
    std::function<void(bool read_only)> on_change;
    // Where its lines go; stderr by default.
    std::function<void(const std::string& line)> log;
  };

  // Tries a write before it returns, so that a daemon started on a full disk is read-only
  // from its first request on. `store` must outlive the monitor.
  static std::unique_ptr<StoreSpaceMonitor> Start(ExperimentStore& store,
                                                  std::string database_path, Options options);

  StoreSpaceMonitor(const StoreSpaceMonitor&) = delete;
  StoreSpaceMonitor& operator=(const StoreSpaceMonitor&) = delete;
  // Stops the monitor's thread.
  ~StoreSpaceMonitor();

  bool read_only() const { return read_only_.load(); }
  // The last sample; -1 before one could be taken.
  int64_t free_bytes() const { return free_bytes_.load(); }

 private:
  StoreSpaceMonitor(ExperimentStore& store, std::string database_path, Options options);
  // One round: free space; while read-only, a write; the WAL checkpoint when due.
  void CheckOnce();
  void Loop() ABSL_LOCKS_EXCLUDED(mutex_);
  void Log(const std::string& line) const;

  ExperimentStore& store_;
  const std::string database_path_;
  const Options options_;
  std::atomic<bool> read_only_{false};
  std::atomic<int64_t> free_bytes_{-1};
  absl::Time next_checkpoint_;  // only the monitor's thread (and Start, before it) use it

  absl::Mutex mutex_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_STORE_STORE_SPACE_MONITOR_H_
