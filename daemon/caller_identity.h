// Who is calling: the daemon never takes a client's word for it.
//   - unix socket: the kernel's peer credentials (SO_PEERCRED), read when UnixSocketListener
//     accepts the connection and looked up here by the connection's peer string;
//   - loopback TCP (plaintext): the uid owning the client's socket, from /proc/net/tcp{,6};
//   - TLS: the verified client certificate (CN or first SAN), else a bearer token;
//   - plaintext TCP from elsewhere: only with --allow_insecure_tcp, and then the name the client
//     claims (the flag says it is unsafe).
#ifndef GPUPROF_DAEMON_CALLER_IDENTITY_H_
#define GPUPROF_DAEMON_CALLER_IDENTITY_H_

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "daemon/access_policy.h"
#include "grpcpp/server_context.h"

namespace gpuprof::daemon {

// The metadata key the CLI puts its local user name in; trusted only under
// --allow_insecure_tcp.
inline constexpr char kClaimedUserMetadata[] = "gpuprof-user";

struct Caller {
  std::string user;
  std::string authenticated_by;
  bool admin = false;
  std::string admin_reason;
  std::vector<std::string> groups;
};

// Kernel-verified uids of the connections UnixSocketListener handed to gRPC, by the peer
// string gRPC reports for them ("fd:N"). An entry is replaced when the descriptor number is
// reused: gRPC closes a connection's descriptor only once every call on it is gone, so a call
// never sees the entry of a later connection.
class PeerCredentialRegistry {
 public:
  void Record(const std::string& peer, uid_t uid);
  std::optional<uid_t> Find(const std::string& peer) const;

 private:
  mutable absl::Mutex mutex_;
  std::map<std::string, uid_t> uids_ ABSL_GUARDED_BY(mutex_);
};

// The uid owning the local end of a loopback TCP connection whose client end is `peer`
// ("ipv4:127.0.0.1:PORT" or "ipv6:[::1]:PORT"), from the kernel's socket tables. `proc_root`
// is "/proc" except in tests.
absl::StatusOr<uid_t> LoopbackTcpOwner(absl::string_view peer,
                                       const std::string& proc_root = "/proc");
// "ipv4:127.x.x.x:N", "ipv6:[::1]:N", "ipv6:[::ffff:127.x.x.x]:N".
bool IsLoopbackPeer(absl::string_view peer);
// The password database's name, else "uid:N".
std::string UserNameOfUid(uid_t uid);

enum class TlsUserFrom { kCommonName, kSubjectAltName };

class Authenticator {
 public:
  struct Options {
    TlsUserFrom tls_user_from = TlsUserFrom::kCommonName;
    bool allow_insecure_tcp = false;
  };
  Authenticator(Options options, const AccessControl* access,
                const PeerCredentialRegistry* unix_peers);

  // UNAUTHENTICATED with the reason when the caller cannot be identified.
  absl::StatusOr<Caller> Identify(const grpc::ServerContextBase& context) const;
  // Completes a caller known by name (admin decision, groups); for tests and on-behalf checks.
  Caller Describe(std::string user, std::string authenticated_by, bool is_daemon_uid) const;

 private:
  const Options options_;
  const AccessControl* const access_;
  const PeerCredentialRegistry* const unix_peers_;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_CALLER_IDENTITY_H_
