// The daemon's own copies of its TLS files (certificate, key, client CA, CRLs), which gRPC's
// certificate provider watches. gRPC 1.51 only re-reads certificate files on a timer of its
// own, with no way to ask it to reload now; so the provider watches these copies every second,
// and the daemon refreshes them from the configured files when told to: on SIGHUP, and every
// --tls_reload_interval when they changed on disk. A refresh writes each changed file beside
// its copy and renames it over, so the provider never reads half a file.
//
// CRLs: gRPC hands the CRL directory to OpenSSL, which reads a CRL once per SSL_CTX and keeps
// it; a CRL replaced on disk is not seen until gRPC builds a new SSL_CTX, which it does only
// when the provider reports new certificates. So the CRLs are mirrored too, and the CA copy
// starts with a comment line naming a digest of the CRLs in use (PEM readers skip text outside
// BEGIN/END blocks): a changed CRL changes the CA copy, the provider reports it, and the next
// handshakes use a fresh SSL_CTX that reads the new CRLs.
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
    // Directory of CRLs named by hash (openssl rehash: <8 hex digits>.r<N>); empty: none.
    std::string crl_dir = "";
  };

  // Makes `dir` (mode 0700: it holds the private key) and copies the files in. Fails, naming
  // the file, when one cannot be read or written, or a CRL does not parse.
  static absl::StatusOr<std::unique_ptr<TlsFileMirror>> Create(Files sources, std::string dir);

  // The copies, for the certificate provider and the CRL directory option.
  const Files& copies() const { return copies_; }

  // Copies each source file whose content differs from its copy, and the CRLs named by hash
  // in the CRL directory (removing copies of CRLs gone from it); returns the sources copied or
  // removed (empty: nothing changed). A source that cannot be read, a CRL that does not parse
  // as PEM, or a CRL directory with no CRL named by hash leaves every copy as it was.
  absl::StatusOr<std::vector<std::string>> Refresh();

 private:
  TlsFileMirror(Files sources, Files copies)
      : sources_(std::move(sources)), copies_(std::move(copies)) {}

  const Files sources_;
  const Files copies_;
  absl::Mutex mutex_;  // one refresh at a time (SIGHUP and the timer)
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_TLS_FILE_MIRROR_H_
