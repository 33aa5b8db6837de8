#include "daemon/caller_identity.h"

#include <arpa/inet.h>
#include <pwd.h>
#include <unistd.h>

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

std::optional<uid_t> FindOwner(const std::string& table, const std::string& local_address) {
  std::ifstream file(table);
  std::string line;
  std::getline(file, line);  // header
  while (std::getline(file, line)) {
    std::vector<absl::string_view> columns =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid ...
    if (columns.size() < 8 || columns[1] != local_address) continue;
    uint32_t uid = 0;
    if (absl::SimpleAtoi(columns[7], &uid)) return static_cast<uid_t>(uid);
  }
  return std::nullopt;
}

std::string FirstProperty(const grpc::AuthContext& auth, const char* name) {
  for (const auto& value : auth.FindPropertyValues(name)) {
    if (!value.empty()) return std::string(value.data(), value.size());
  }
  return "";
}

}  // namespace

void PeerCredentialRegistry::Record(const std::string& peer, uid_t uid) {
  absl::MutexLock lock(&mutex_);
  uids_[peer] = uid;
}

std::optional<uid_t> PeerCredentialRegistry::Find(const std::string& peer) const {
  absl::MutexLock lock(&mutex_);
  const auto it = uids_.find(peer);
  if (it == uids_.end()) return std::nullopt;
  return it->second;
}

bool IsLoopbackPeer(absl::string_view peer) {
  const auto address = ParsePeer(peer);
  if (!address.has_value()) return false;
  if (!address->ipv6) return (ntohl(address->v4.s_addr) >> 24) == 127;
  if (IN6_IS_ADDR_LOOPBACK(&address->v6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&address->v6) && address->v6.s6_addr[12] == 127;
}

absl::StatusOr<uid_t> LoopbackTcpOwner(absl::string_view peer, const std::string& proc_root) {
  const auto address = ParsePeer(peer);
  if (!address.has_value() || !IsLoopbackPeer(peer)) {
    return absl::InvalidArgumentError(absl::StrCat("not a loopback TCP peer: ", peer));
  }
  // An IPv4 client may hold a dual-stack IPv6 socket (gRPC's own clients do), listed in tcp6
  // under the IPv4-mapped address; gRPC names such a peer ipv4: all the same.
  std::vector<std::pair<std::string, PeerAddress>> candidates;
  if (!address->ipv6) {
    candidates.push_back({"/net/tcp", *address});
    PeerAddress mapped = *address;
    mapped.ipv6 = true;
    memset(&mapped.v6, 0, sizeof(mapped.v6));
    mapped.v6.s6_addr[10] = 0xff;
    mapped.v6.s6_addr[11] = 0xff;
    memcpy(mapped.v6.s6_addr + 12, &address->v4.s_addr, 4);
    candidates.push_back({"/net/tcp6", mapped});
  } else {
    candidates.push_back({"/net/tcp6", *address});
    if (IN6_IS_ADDR_V4MAPPED(&address->v6)) {
      PeerAddress plain = *address;
      plain.ipv6 = false;
      memcpy(&plain.v4.s_addr, address->v6.s6_addr + 12, 4);
      candidates.push_back({"/net/tcp", plain});
    }
  }
  for (const auto& [table, candidate] : candidates) {
    if (auto uid = FindOwner(absl::StrCat(proc_root, table), ProcAddress(candidate));
        uid.has_value()) {
      return *uid;
    }
  }
  return absl::NotFoundError(
      absl::StrCat("no local socket ", peer, " in ", proc_root, "/net/tcp{,6} (the client is "
                   "gone, or lives in another network namespace)"));
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
      return Describe(from_certificate,
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
  if (absl::StartsWith(peer, "fd:") && unix_peers_ != nullptr) {
    if (const auto uid = unix_peers_->Find(peer); uid.has_value()) {
      return Describe(UserNameOfUid(*uid),
                      absl::StrCat("unix peer credentials (uid ", *uid, ")"), *uid == geteuid());
    }
  }
  if (IsLoopbackPeer(peer)) {
    auto uid = LoopbackTcpOwner(peer);
    if (!uid.ok()) {
      return absl::UnauthenticatedError(
          absl::StrCat("cannot tell which local user owns this connection: ", uid.status().message()));
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
