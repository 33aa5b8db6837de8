// One accepted client connection, before gRPC sees it: the kernel says whom it belongs to
// (unix: the peer's credentials; loopback TCP: the uid owning the client's socket, matched on
// the whole connection; other TCP: only the remote host, the user comes later from TLS), the
// connection caps admit it for that owner, and its identity is recorded under the name gRPC
// will report for it, where the authenticator finds it for every call on the connection.
#ifndef GPUPROF_DAEMON_ACCEPTED_CONNECTION_H_
#define GPUPROF_DAEMON_ACCEPTED_CONNECTION_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "daemon/server/caller_identity.h"
#include "daemon/server/connection_limit.h"

namespace gpuprof::daemon {

enum class ListenerKind { kUnix, kTcp };

struct AcceptedPeer {
  std::string grpc_peer;      // "fd:N" (unix) or "ipv4:127.0.0.1:P"
  std::optional<uid_t> uid;   // kernel-verified local owner; none for remote or unidentified
  ConnectionOwner owner;      // whom it counts against
};

// What the kernel says about the accepted socket `fd`. `proc_root` is "/proc" except in tests.
AcceptedPeer DescribeAcceptedConnection(int fd, ListenerKind kind,
                                        const std::string& proc_root = "/proc");

// Accepts one connection from the non-blocking `listen_fd` (close-on-exec, non-blocking),
// admits it under `limit` (null: no cap) and records its identity in `registry`. Returns its
// descriptor, or -1 when there was none to take or it was refused (then it is closed). Errors
// other than "try again" are printed naming `listener`; out of descriptors, it waits 100 ms so
// that the caller does not spin.
int AcceptConnection(int listen_fd, ListenerKind kind, ConnectionLimit* limit,
                     PeerCredentialRegistry* registry, absl::string_view listener);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_ACCEPTED_CONNECTION_H_
