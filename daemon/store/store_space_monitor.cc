#include "daemon/store/store_space_monitor.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpuprof::daemon {

absl::StatusOr<int64_t> FreeBytesOnDiskHolding(const std::string& path) {
  std::filesystem::path directory = std::filesystem::path(path).parent_path();
  if (std::filesystem::is_directory(path)) directory = path;
  if (directory.empty()) directory = ".";
  struct statvfs disk {};
  if (statvfs(directory.c_str(), &disk) != 0) {
    return absl::UnavailableError(
        absl::StrCat("statvfs ", directory.string(), ": ", std::strerror(errno)));
  }
  return static_cast<int64_t>(disk.f_bavail) * static_cast<int64_t>(disk.f_frsize);
}

std::string DiskFullMessage(const std::string& database_path) {
  return absl::StrCat("the disk holding ", database_path,
                      " is full: serving reads only (list, get, watch); submits and every other "
                      "write are refused. Free space there: gpuprofd tries a write every second "
                      "and carries on by itself, writing what start-up could not");
}

std::unique_ptr<StoreSpaceMonitor> StoreSpaceMonitor::Start(ExperimentStore& store,
                                                            std::string database_path,
                                                            Options options) {
  std::unique_ptr<StoreSpaceMonitor> monitor(
      new StoreSpaceMonitor(store, std::move(database_path), std::move(options)));
  // Whether start-up's own writes went through or not, one write tells: on a full disk the
  // daemon serves reads only from its first request on.
  (void)store.ProbeWrite();
  monitor->CheckOnce();
  monitor->thread_ = std::thread([m = monitor.get()] { m->Loop(); });
  return monitor;
}

StoreSpaceMonitor::StoreSpaceMonitor(ExperimentStore& store, std::string database_path,
                                     Options options)
    : store_(store),
      database_path_(std::move(database_path)),
      options_(std::move(options)),
      next_checkpoint_(absl::Now() + options_.checkpoint_interval) {}

StoreSpaceMonitor::~StoreSpaceMonitor() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void StoreSpaceMonitor::Log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::fprintf(stderr, "gpuprofd: %s\n", line.c_str());
  }
}

void StoreSpaceMonitor::CheckOnce() {
  if (absl::StatusOr<int64_t> free = FreeBytesOnDiskHolding(database_path_); free.ok()) {
    free_bytes_ = *free;
  }
  // Any write refused for a full disk (a submit, an event, start-up's) sets the store's flag;
  // while it is set, this write is what notices space coming back when nothing else writes.
  if (store_.disk_full()) (void)store_.ProbeWrite();
  const bool read_only = store_.disk_full();
  if (read_only != read_only_.exchange(read_only)) {
    Log(read_only ? DiskFullMessage(database_path_)
                  : absl::StrCat("the disk holding ", database_path_,
                                 " takes writes again: serving reads and writes"));
    if (options_.on_change) options_.on_change(read_only);
  }
  if (!read_only && absl::Now() >= next_checkpoint_) {
    // Busy (a reader mid-statement) is fine: the next round tries again.
    (void)store_.CheckpointWal();
    next_checkpoint_ = absl::Now() + options_.checkpoint_interval;
  }
}

void StoreSpaceMonitor::Loop() {
  absl::MutexLock lock(&mutex_);
  while (true) {
    const absl::Time next = absl::Now() + options_.interval;
    while (!stopping_ && absl::Now() < next) {
      mutex_.AwaitWithDeadline(absl::Condition(&stopping_), next);
    }
    if (stopping_) return;
    mutex_.Unlock();
    CheckOnce();
    mutex_.Lock();
  }
}

}  // namespace gpuprof::daemon
