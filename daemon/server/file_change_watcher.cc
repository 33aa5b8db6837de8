#include "daemon/server/file_change_watcher.h"

#include <sys/stat.h>

#include <filesystem>
#include <utility>

#include "absl/hash/hash.h"

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
  if (S_ISDIR(info.st_mode)) {
    // A file rewritten in place inside the directory changes neither the directory's size
    // nor its time: fold in each entry's own fingerprint (one level, not recursive), summed so
    // that the order in which the directory lists them does not matter.
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
      if (std::filesystem::is_directory(entry.path(), error)) continue;
      const Fingerprint file = Take(entry.path().string());
      fingerprint.entries += absl::HashOf(entry.path().filename().string(), file.exists,
                                          file.device, file.inode, file.size, file.modified_ns);
    }
  }
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
