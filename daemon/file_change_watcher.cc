#include "daemon/file_change_watcher.h"

#include <sys/stat.h>

#include <utility>

namespace gpuprof::daemon {

FileChangeWatcher::Fingerprint FileChangeWatcher::Take(const std::string& path) {
  Fingerprint fingerprint;
  struct stat info {};
  // stat, not lstat: a ConfigMap's file is a symlink whose target changes.
  if (stat(path.c_str(), &info) != 0) return fingerprint;
  fingerprint.exists = true;
  fingerprint.device = info.st_dev;
  fingerprint.inode = info.st_ino;
  fingerprint.size = info.st_size;
  fingerprint.modified_ns =
      static_cast<long long>(info.st_mtim.tv_sec) * 1000000000LL + info.st_mtim.tv_nsec;
  return fingerprint;
}

FileChangeWatcher::FileChangeWatcher(std::vector<std::string> paths, absl::Duration interval,
                                     OnChange on_change)
    : paths_(std::move(paths)), interval_(interval), on_change_(std::move(on_change)) {
  for (const std::string& path : paths_) last_.push_back(Take(path));
  thread_ = std::thread([this] { Run(); });
}

FileChangeWatcher::~FileChangeWatcher() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void FileChangeWatcher::Run() {
  while (!stop_.WaitForNotificationWithTimeout(interval_)) {
    std::vector<std::string> changed;
    for (size_t i = 0; i < paths_.size(); ++i) {
      Fingerprint now = Take(paths_[i]);
      if (now == last_[i]) continue;
      last_[i] = now;
      changed.push_back(paths_[i]);
    }
    if (!changed.empty()) on_change_(changed);
  }
}

}  // namespace gpuprof::daemon
