// The daemon's own copies of its TLS files (certificate, key, client CA), which gRPC's
// certificate provider watches. gRPC 1.51 only re-reads certificate files on a timer of its
// own, with no way to ask it to reload now; so the provider watches these copies every second,
// and the daemon refreshes them from the configured files when told to: on SIGHUP, and every
// --tls_reload_interval when they changed on disk. A refresh writes each changed file beside
// its copy and renames it over, so the provider never reads half a file.
#ifndef GPUPROF_DAEMON_TLS_FILE_MIRROR_H_
#define GPUPROF_DAEMON_TLS_FILE_MIRROR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace gpuprof::daemon {

class TlsFileMirror {
 public:
  struct Files {
    std::string cert;
    std::string key;
    std::string ca;
  };

  // Makes `dir` (mode 0700: it holds the private key) and copies the files in. Fails, naming
  // the file, when one cannot be read or written.
  static absl::StatusOr<std::unique_ptr<TlsFileMirror>> Create(Files sources, std::string dir);

  // The copies, for the certificate provider.
  const Files& copies() const { return copies_; }

  // Copies each source file whose content differs from its copy; returns the sources copied
  // (empty: nothing changed). A source that cannot be read leaves every copy as it was.
  absl::StatusOr<std::vector<std::string>> Refresh();

 private:
  TlsFileMirror(Files sources, Files copies) : sources_(std::move(sources)), copies_(std::move(copies)) {}

  const Files sources_;
  const Files copies_;
  absl::Mutex mutex_;  // one refresh at a time (SIGHUP and the timer)
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_TLS_FILE_MIRROR_H_
