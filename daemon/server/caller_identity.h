// Who is calling: the daemon never takes a client's word for it.
//   - unix socket: the kernel's peer credentials (SO_PEERCRED), read when UnixSocketListener
//     accepts the connection and looked up here by the connection's peer string;
//   - loopback TCP (plaintext): the uid owning the client's socket, from /proc/net/tcp{,6},
//     matched on the whole connection (both ends, ESTABLISHED) when the daemon accepts it;
//   - TLS: the verified client certificate (CN or first SAN; "tls:NAME" unless the policy says
//     certificate subjects are local accounts), else a bearer token (the user the policy maps
//     it to);
//   - plaintext TCP from elsewhere: only with --allow_insecure_tcp, and then the name the client
//     claims (the flag says it is unsafe).
// A caller whose identity cannot be established is anonymous: refused, never taken for root.
#ifndef GPUPROF_DAEMON_CALLER_IDENTITY_H_
#define GPUPROF_DAEMON_CALLER_IDENTITY_H_

#include <sys/socket.h>
#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "daemon/admission/access_policy.h"
#include "grpcpp/server_context.h"

namespace gpuprof::daemon {

// The metadata key the CLI puts its local user name in; trusted only under
// --allow_insecure_tcp.
inline constexpr char kClaimedUserMetadata[] = "gpuprof-user";
// The name space of users known by a TLS certificate, unless the policy maps certificate
// subjects to local accounts (tls_subjects_are_local_users).
inline constexpr char kTlsUserPrefix[] = "tls:";

struct Caller {
  std::string user;
  std::string authenticated_by;
  bool admin = false;
  std::string admin_reason;
  std::vector<std::string> groups;
};

// What the kernel says about each connection the daemon's listeners accepted, recorded before
// gRPC sees the connection and looked up by the peer name gRPC reports for it: "fd:N" for a
// unix connection (handed over by descriptor), the client's address ("ipv4:127.0.0.1:P",
// "ipv6:[::1]:P") for TCP. An entry holds only while its descriptor still refers to the socket
// that was accepted (same inode): a closed connection's entry is never found, and a later
// connection under the same name replaces it.
//
// Two live TCP connections can share a client address when the daemon listens on several
// addresses; that name is then ambiguous and identifies nobody.
class PeerCredentialRegistry {
 public:
  // `uid`: the kernel-verified owner, none when it could not be established (the connection
  // is then anonymous). `fd` is the accepted socket (-1: no liveness check, for tests).
  void Record(const std::string& peer, std::optional<uid_t> uid, int fd = -1);
  // The owner of the live connection named `peer`; none if unknown, closed or ambiguous.
  std::optional<uid_t> Find(const std::string& peer) const;

 private:
  struct Entry {
    std::optional<uid_t> uid;
    int fd = -1;
    dev_t device = 0;
    ino_t inode = 0;
    bool ambiguous = false;
  };
  static bool Live(const Entry& entry);
  void SweepClosedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  mutable absl::Mutex mutex_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mutex_);
  size_t sweep_at_ ABSL_GUARDED_BY(mutex_) = 1024;
};

// The uid owning the client end of the loopback TCP connection accepted as `fd`: the one
// socket whose local address is the client's, whose remote address is this socket's own, and
// whose state is ESTABLISHED (closed and TIME_WAIT sockets of the same port carry other uids,
// root's among them). The kernel is asked by netlink sock_diag (one exact lookup), or where
// that is unavailable by reading /proc/net/tcp{,6}. The accepted socket must still be
// ESTABLISHED after the lookup, so the socket found was its peer's. `proc_root` is "/proc"
// except in tests; any other root is read as files.
absl::StatusOr<uid_t> AcceptedLoopbackOwner(int fd, const std::string& proc_root = "/proc");
// The same for a connection given by its two ends, "ipv4:127.0.0.1:P" (client) and the server
// end, read from the tables only (no liveness check): for tests of the table matching.
absl::StatusOr<uid_t> LoopbackTcpOwner(absl::string_view client, absl::string_view server,
                                       const std::string& proc_root = "/proc");
// The peer name gRPC gives a TCP connection from `address` (IPv4-mapped IPv6 named as IPv4).
std::string GrpcPeerName(const sockaddr* address, socklen_t length);
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
