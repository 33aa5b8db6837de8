#include "daemon/server/caller_identity.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/security/auth_context.h"

namespace gpuprof::daemon {
namespace {

struct PeerAddress {
  bool ipv6 = false;
  in_addr v4{};
  in6_addr v6{};
  int port = 0;
};

std::optional<PeerAddress> ParsePeer(absl::string_view peer) {
  PeerAddress address;
  absl::string_view host;
  absl::string_view port;
  if (absl::ConsumePrefix(&peer, "ipv4:")) {
    const size_t colon = peer.rfind(':');
    if (colon == absl::string_view::npos) return std::nullopt;
    host = peer.substr(0, colon);
    port = peer.substr(colon + 1);
    if (inet_pton(AF_INET, std::string(host).c_str(), &address.v4) != 1) return std::nullopt;
  } else if (absl::ConsumePrefix(&peer, "ipv6:[")) {
    const size_t close = peer.find("]:");
    if (close == absl::string_view::npos) return std::nullopt;
    host = peer.substr(0, close);
    port = peer.substr(close + 2);
    address.ipv6 = true;
    if (inet_pton(AF_INET6, std::string(host).c_str(), &address.v6) != 1) return std::nullopt;
  } else {
    return std::nullopt;
  }
  if (!absl::SimpleAtoi(port, &address.port)) return std::nullopt;
  return address;
}

// /proc/net/tcp writes each 32-bit word of an address in host byte order, as 8 hex digits.
std::string ProcWord(uint32_t network_order_word) {
  return absl::AsciiStrToUpper(absl::StrFormat("%08X", network_order_word));
}

std::string ProcAddress(const PeerAddress& address) {
  std::string text;
  if (!address.ipv6) {
    text = ProcWord(address.v4.s_addr);
  } else {
    for (int word = 0; word < 4; ++word) {
      uint32_t value;
      memcpy(&value, address.v6.s6_addr + 4 * word, 4);
      text += ProcWord(value);
    }
  }
  return absl::StrCat(text, ":", absl::AsciiStrToUpper(absl::StrFormat("%04X", address.port)));
}

// TCP_ESTABLISHED as /proc/net/tcp writes it ("st" column).
constexpr absl::string_view kEstablished = "01";

// The uid of the ESTABLISHED socket whose ends are exactly `local` and `remote` (one at most:
// an established connection's four-tuple is unique in a network namespace).
std::optional<uid_t> FindOwner(const std::string& table, const std::string& local,
                               const std::string& remote) {
  std::ifstream file(table);
  std::string line;
  std::getline(file, line);  // header
  while (std::getline(file, line)) {
    std::vector<absl::string_view> columns =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid ...
    if (columns.size() < 8 || columns[1] != local || columns[2] != remote ||
        columns[3] != kEstablished) {
      continue;
    }
    uint32_t uid = 0;
    if (absl::SimpleAtoi(columns[7], &uid)) return static_cast<uid_t>(uid);
  }
  return std::nullopt;
}

// What the kernel's socket-diagnostics interface says of the socket whose own end is `local`
// and whose other end is `remote`: its uid if it is ESTABLISHED, none if there is no such
// socket or it is in another state; Unavailable when netlink cannot be used here (the caller
// then reads /proc). One exact lookup by four-tuple: it costs the same with ten or ten
// thousand connections open and allocates nothing, which matters when a flood of connections
// is being refused.
absl::StatusOr<std::optional<uid_t>> SocketDiagOwner(const PeerAddress& local,
                                                     const PeerAddress& remote) {
  const int netlink = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (netlink < 0) {
    return absl::UnavailableError(absl::StrCat("netlink sock_diag: ", strerror(errno)));
  }
  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } query{};
  query.header.nlmsg_len = sizeof(query);
  query.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  query.header.nlmsg_flags = NLM_F_REQUEST;  // one socket by its four-tuple, not a dump
  query.request.sdiag_family = local.ipv6 ? AF_INET6 : AF_INET;
  query.request.sdiag_protocol = IPPROTO_TCP;
  query.request.idiag_states = 1u << TCP_ESTABLISHED;
  query.request.id.idiag_sport = htons(static_cast<uint16_t>(local.port));
  query.request.id.idiag_dport = htons(static_cast<uint16_t>(remote.port));
  if (local.ipv6) {
    memcpy(query.request.id.idiag_src, &local.v6, sizeof(local.v6));
    memcpy(query.request.id.idiag_dst, &remote.v6, sizeof(remote.v6));
  } else {
    memcpy(query.request.id.idiag_src, &local.v4, sizeof(local.v4));
    memcpy(query.request.id.idiag_dst, &remote.v4, sizeof(remote.v4));
  }
  query.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  query.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  alignas(nlmsghdr) char reply[512];
  ssize_t received = -1;
  if (sendto(netlink, &query, sizeof(query), 0, reinterpret_cast<sockaddr*>(&kernel),
             sizeof(kernel)) == static_cast<ssize_t>(sizeof(query))) {
    do {
      received = recv(netlink, reply, sizeof(reply), 0);
    } while (received < 0 && errno == EINTR);
  }
  const int saved_errno = errno;
  close(netlink);
  if (received < static_cast<ssize_t>(sizeof(nlmsghdr))) {
    return absl::UnavailableError(absl::StrCat("netlink sock_diag: ", strerror(saved_errno)));
  }
  const auto* header = reinterpret_cast<const nlmsghdr*>(reply);
  if (header->nlmsg_type == NLMSG_ERROR) {
    const auto* error = reinterpret_cast<const nlmsgerr*>(NLMSG_DATA(header));
    if (error->error == -ENOENT) return std::optional<uid_t>();
    return absl::UnavailableError(absl::StrCat("netlink sock_diag: ", strerror(-error->error)));
  }
  if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
      header->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) {
    return absl::UnavailableError("netlink sock_diag: unexpected reply");
  }
  const auto* socket_info = reinterpret_cast<const inet_diag_msg*>(NLMSG_DATA(header));
  // An exact lookup also finds TIME_WAIT and listening sockets (uid 0): only ESTABLISHED counts.
  if (socket_info->idiag_state != TCP_ESTABLISHED) return std::optional<uid_t>();
  return std::optional<uid_t>(socket_info->idiag_uid);
}

// The same address as IPv4-mapped IPv6, or as plain IPv4 when it is mapped; none otherwise.
std::optional<PeerAddress> OtherFamily(const PeerAddress& address) {
  PeerAddress other = address;
  if (!address.ipv6) {
    other.ipv6 = true;
    memset(&other.v6, 0, sizeof(other.v6));
    other.v6.s6_addr[10] = 0xff;
    other.v6.s6_addr[11] = 0xff;
    memcpy(other.v6.s6_addr + 12, &address.v4.s_addr, 4);
    return other;
  }
  if (!IN6_IS_ADDR_V4MAPPED(&address.v6)) return std::nullopt;
  other.ipv6 = false;
  memcpy(&other.v4.s_addr, address.v6.s6_addr + 12, 4);
  return other;
}

bool IsLoopbackAddress(const PeerAddress& address) {
  if (!address.ipv6) return (ntohl(address.v4.s_addr) >> 24) == 127;
  if (IN6_IS_ADDR_LOOPBACK(&address.v6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&address.v6) && address.v6.s6_addr[12] == 127;
}

// The client socket lives in tcp or tcp6 according to its own family, which the server cannot
// see (a dual-stack IPv6 client socket talks to an IPv4 listener with mapped addresses), so
// both tables are read, each with the pair written in its family.
absl::StatusOr<uid_t> OwnerOfConnection(const PeerAddress& client, const PeerAddress& server,
                                        const std::string& proc_root) {
  if (!IsLoopbackAddress(client)) {
    return absl::InvalidArgumentError("not a loopback TCP connection");
  }
  std::vector<std::pair<PeerAddress, PeerAddress>> forms = {{client, server}};
  const auto other_client = OtherFamily(client);
  const auto other_server = OtherFamily(server);
  if (other_client.has_value() && other_server.has_value()) {
    forms.push_back({*other_client, *other_server});
  }
  // The kernel asked directly where it answers (the daemon's own /proc only: a test's fake
  // tables are read as files).
  if (proc_root == "/proc") {
    bool answered = true;
    for (const auto& [client_form, server_form] : forms) {
      auto uid = SocketDiagOwner(client_form, server_form);
      if (!uid.ok()) {
        answered = false;
        break;
      }
      if (uid->has_value()) return **uid;
    }
    if (answered) {
      return absl::NotFoundError(
          "no established client socket for this connection (the client closed it, or lives "
          "in another network namespace)");
    }
  }
  for (const auto& [client_form, server_form] : forms) {
    const std::string table =
        absl::StrCat(proc_root, client_form.ipv6 ? "/net/tcp6" : "/net/tcp");
    if (auto uid = FindOwner(table, ProcAddress(client_form), ProcAddress(server_form));
        uid.has_value()) {
      return *uid;
    }
  }
  return absl::NotFoundError(
      "no established client socket for this connection in /proc/net/tcp{,6} (the client "
      "closed it, or lives in another network namespace)");
}

std::optional<PeerAddress> FromSockaddr(const sockaddr_storage& storage) {
  PeerAddress address;
  if (storage.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&storage);
    address.v4 = v4->sin_addr;
    address.port = ntohs(v4->sin_port);
    return address;
  }
  if (storage.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    address.ipv6 = true;
    address.v6 = v6->sin6_addr;
    address.port = ntohs(v6->sin6_port);
    return address;
  }
  return std::nullopt;
}

bool Established(int fd) {
  tcp_info info{};
  socklen_t length = sizeof(info);
  return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) == 0 &&
         info.tcpi_state == TCP_ESTABLISHED;
}

std::string FirstProperty(const grpc::AuthContext& auth, const char* name) {
  for (const auto& value : auth.FindPropertyValues(name)) {
    if (!value.empty()) return std::string(value.data(), value.size());
  }
  return "";
}

}  // namespace

bool PeerCredentialRegistry::Live(const Entry& entry) {
  if (entry.fd < 0) return true;
  struct stat now {};
  return fstat(entry.fd, &now) == 0 && now.st_dev == entry.device && now.st_ino == entry.inode;
}

void PeerCredentialRegistry::SweepClosedLocked() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = Live(it->second) ? std::next(it) : entries_.erase(it);
  }
  sweep_at_ = std::max<size_t>(1024, 2 * entries_.size());
}

void PeerCredentialRegistry::Record(const std::string& peer, std::optional<uid_t> uid, int fd) {
  Entry entry{uid, fd};
  struct stat socket_stat {};
  if (fd >= 0 && fstat(fd, &socket_stat) == 0) {
    entry.device = socket_stat.st_dev;
    entry.inode = socket_stat.st_ino;
  }
  absl::MutexLock lock(&mutex_);
  if (entries_.size() >= sweep_at_) SweepClosedLocked();
  const auto it = entries_.find(peer);
  // Another live connection under the same name (a different descriptor): neither can be
  // told from the other by the name gRPC reports, so the name identifies nobody.
  if (it != entries_.end() && fd >= 0 && it->second.fd >= 0 && it->second.fd != fd &&
      Live(it->second)) {
    entry.ambiguous = true;
  }
  entries_[peer] = entry;
}

std::optional<uid_t> PeerCredentialRegistry::Find(const std::string& peer) const {
  absl::MutexLock lock(&mutex_);
  const auto it = entries_.find(peer);
  if (it == entries_.end() || it->second.ambiguous || !Live(it->second)) return std::nullopt;
  return it->second.uid;
}

std::string GrpcPeerName(const sockaddr* address, socklen_t length) {
  sockaddr_storage storage{};
  memcpy(&storage, address, std::min<size_t>(length, sizeof(storage)));
  auto parsed = FromSockaddr(storage);
  if (!parsed.has_value()) return "";
  if (parsed->ipv6 && IN6_IS_ADDR_V4MAPPED(&parsed->v6)) parsed = OtherFamily(*parsed);
  char text[INET6_ADDRSTRLEN] = {};
  if (!parsed->ipv6) {
    inet_ntop(AF_INET, &parsed->v4, text, sizeof(text));
    return absl::StrCat("ipv4:", text, ":", parsed->port);
  }
  inet_ntop(AF_INET6, &parsed->v6, text, sizeof(text));
  return absl::StrCat("ipv6:[", text, "]:", parsed->port);
}

bool IsLoopbackPeer(absl::string_view peer) {
  const auto address = ParsePeer(peer);
  return address.has_value() && IsLoopbackAddress(*address);
}

absl::StatusOr<uid_t> LoopbackTcpOwner(absl::string_view client, absl::string_view server,
                                       const std::string& proc_root) {
  const auto client_address = ParsePeer(client);
  const auto server_address = ParsePeer(server);
  if (!client_address.has_value() || !server_address.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a TCP connection: ", client, " -> ", server));
  }
  return OwnerOfConnection(*client_address, *server_address, proc_root);
}

absl::StatusOr<uid_t> AcceptedLoopbackOwner(int fd, const std::string& proc_root) {
  sockaddr_storage client{};
  sockaddr_storage server{};
  socklen_t client_length = sizeof(client);
  socklen_t server_length = sizeof(server);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&client), &client_length) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&server), &server_length) != 0) {
    return absl::NotFoundError(absl::StrCat("the connection is gone: ", strerror(errno)));
  }
  const auto client_address = FromSockaddr(client);
  const auto server_address = FromSockaddr(server);
  if (!client_address.has_value() || !server_address.has_value()) {
    return absl::InvalidArgumentError("not a TCP connection");
  }
  if (!Established(fd)) {
    return absl::NotFoundError("the connection was closed before it could be identified");
  }
  auto uid = OwnerOfConnection(*client_address, *server_address, proc_root);
  // Still established after the read: the client had not closed, so the line read was this
  // connection's other end and not a later socket that reused its four-tuple.
  if (uid.ok() && !Established(fd)) {
    return absl::NotFoundError("the connection was closed while it was identified");
  }
  return uid;
}

std::string UserNameOfUid(uid_t uid) {
  passwd entry;
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  return absl::StrCat("uid:", uid);
}

Authenticator::Authenticator(Options options, const AccessControl* access,
                             const PeerCredentialRegistry* unix_peers)
    : options_(options), access_(access), unix_peers_(unix_peers) {}

Caller Authenticator::Describe(std::string user, std::string authenticated_by,
                               bool is_daemon_uid) const {
  Caller caller;
  caller.user = std::move(user);
  caller.authenticated_by = std::move(authenticated_by);
  caller.groups = UnixGroupsOf(caller.user);
  const AdminDecision admin = access_->IsAdmin(caller.user, caller.groups, is_daemon_uid);
  caller.admin = admin.admin;
  caller.admin_reason = admin.reason;
  return caller;
}

absl::StatusOr<Caller> Authenticator::Identify(const grpc::ServerContextBase& context) const {
  const std::string peer = context.peer();
  const auto& metadata = context.client_metadata();
  std::string bearer;
  if (const auto it = metadata.find("authorization"); it != metadata.end()) {
    absl::string_view value(it->second.data(), it->second.size());
    if (!absl::ConsumePrefix(&value, "Bearer ")) {
      return absl::UnauthenticatedError(
          "authorization metadata: expected \"Bearer <token>\"");
    }
    bearer = std::string(value);
  }
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  // The TLS credentials (certificate provider) name their transport "tls", the older SSL
  // credentials "ssl".
  const std::string security =
      auth == nullptr ? "" : FirstProperty(*auth, GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME);
  const bool tls =
      security == GRPC_TLS_TRANSPORT_SECURITY_TYPE || security == GRPC_SSL_TRANSPORT_SECURITY_TYPE;
  if (tls) {
    const bool use_cn = options_.tls_user_from == TlsUserFrom::kCommonName;
    const std::string from_certificate =
        FirstProperty(*auth, use_cn ? GRPC_X509_CN_PROPERTY_NAME : GRPC_X509_SAN_PROPERTY_NAME);
    if (!from_certificate.empty()) {
      // A certificate names someone the CA vouches for, not a local account: CN=root is not
      // local root unless the policy says the CA's subjects are this box's accounts.
      std::string user = access_->TlsSubjectsAreLocalUsers()
                             ? from_certificate
                             : absl::StrCat(kTlsUserPrefix, from_certificate);
      return Describe(std::move(user),
                      use_cn ? "TLS client certificate (CN)" : "TLS client certificate (SAN)",
                      false);
    }
    if (!FirstProperty(*auth, GRPC_X509_PEM_CERT_PROPERTY_NAME).empty()) {
      return absl::UnauthenticatedError(absl::StrCat(
          "the client certificate has no ", use_cn ? "subject CN" : "subject alternative name",
          " to take the user name from (gpuprofd --tls_user_from=", use_cn ? "cn" : "san", ")"));
    }
    if (bearer.empty()) {
      return absl::UnauthenticatedError(
          "no client certificate and no bearer token: pass --tls-cert/--tls-key or --token");
    }
    const auto user = access_->UserForToken(bearer);
    if (!user.has_value()) {
      return absl::UnauthenticatedError("the bearer token is not in the daemon's policy");
    }
    return Describe(*user, "bearer token", false);
  }
  if (!bearer.empty()) {
    return absl::UnauthenticatedError(
        "bearer tokens are accepted only over TLS, and this connection is plaintext; the token "
        "was not checked (it crossed the wire in clear: consider it exposed)");
  }
  if (absl::StartsWith(peer, "fd:")) {
    const std::optional<uid_t> uid =
        unix_peers_ == nullptr ? std::nullopt : unix_peers_->Find(peer);
    if (!uid.has_value()) {
      return absl::UnauthenticatedError(
          absl::StrCat("no peer credentials recorded for the unix connection ", peer));
    }
    return Describe(UserNameOfUid(*uid), absl::StrCat("unix peer credentials (uid ", *uid, ")"),
                    *uid == geteuid());
  }
  if (IsLoopbackPeer(peer)) {
    const std::optional<uid_t> uid =
        unix_peers_ == nullptr ? std::nullopt : unix_peers_->Find(peer);
    if (!uid.has_value()) {
      // Anonymous: the kernel did not vouch for this connection when it was accepted.
      return absl::UnauthenticatedError(absl::StrCat(
          "cannot tell which local user owns the loopback connection from ", peer,
          " (it was not an established connection of this network namespace when the daemon "
          "accepted it); use the unix socket"));
    }
    return Describe(UserNameOfUid(*uid), absl::StrCat("loopback TCP owner (uid ", *uid, ")"),
                    *uid == geteuid());
  }
  if (options_.allow_insecure_tcp && (absl::StartsWith(peer, "ipv4:") ||
                                      absl::StartsWith(peer, "ipv6:"))) {
    const auto it = metadata.find(kClaimedUserMetadata);
    if (it == metadata.end() || it->second.empty()) {
      return absl::UnauthenticatedError(absl::StrCat(
          "plaintext TCP from ", peer, ": no user named (", kClaimedUserMetadata, " metadata)"));
    }
    return Describe(std::string(it->second.data(), it->second.size()),
                    "unauthenticated plaintext TCP (--allow_insecure_tcp)", false);
  }
  return absl::UnauthenticatedError(absl::StrCat(
      "cannot identify the caller at ", peer,
      ": use the unix socket, loopback TCP, or TLS with a client certificate"));
}

}  // namespace gpuprof::daemon
