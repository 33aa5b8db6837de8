// Polls files for changes and reports each change once. Kubernetes updates a mounted
// ConfigMap or Secret by swapping a symlink to a new directory, which no inotify watch on the
// file sees reliably; comparing what stat() finds through the path (device, inode, size,
// modification time) every few seconds does, and the same holds for editors and `mv`.
#ifndef GPUPROF_DAEMON_FILE_CHANGE_WATCHER_H_
#define GPUPROF_DAEMON_FILE_CHANGE_WATCHER_H_

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace gpuprof::daemon {

class FileChangeWatcher {
 public:
  // Called from the watcher's thread with the paths that changed since the last poll.
  using OnChange = std::function<void(const std::vector<std::string>& changed)>;

  // Starts polling `paths` every `interval`. A file that is missing counts as a state of its
  // own: appearing or disappearing is a change. A path that is a directory (a CRL directory)
  // changes when any entry in it appears, goes or changes (each stat()ed through symlinks).
  FileChangeWatcher(std::vector<std::string> paths, absl::Duration interval, OnChange on_change);
  // Stops the thread; no callback runs after it returns.
  ~FileChangeWatcher();
  FileChangeWatcher(const FileChangeWatcher&) = delete;
  FileChangeWatcher& operator=(const FileChangeWatcher&) = delete;

  // What stat() saw through a path; equal when nothing observable changed.
  struct Fingerprint {
    bool exists = false;
    unsigned long long device = 0;
    unsigned long long inode = 0;
    long long size = 0;
    long long modified_ns = 0;
    // For a directory: a hash of its entries' names and fingerprints; else 0.
    unsigned long long entries = 0;
    bool operator==(const Fingerprint&) const = default;
  };
  static Fingerprint Take(const std::string& path);

 private:
  void Run();

  const std::vector<std::string> paths_;
  const absl::Duration interval_;
  const OnChange on_change_;
  std::vector<Fingerprint> last_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_FILE_CHANGE_WATCHER_H_
