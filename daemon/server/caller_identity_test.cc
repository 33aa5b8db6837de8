#include "daemon/server/caller_identity.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace gpuprof::daemon {
namespace {

TEST(IsLoopbackPeerTest, Addresses) {
  EXPECT_TRUE(IsLoopbackPeer("ipv4:127.0.0.1:4000"));
  EXPECT_TRUE(IsLoopbackPeer("ipv4:127.5.0.1:4000"));
  EXPECT_TRUE(IsLoopbackPeer("ipv6:[::1]:4000"));
  EXPECT_TRUE(IsLoopbackPeer("ipv6:[::ffff:127.0.0.1]:4000"));
  EXPECT_FALSE(IsLoopbackPeer("ipv4:10.0.0.1:4000"));
  EXPECT_FALSE(IsLoopbackPeer("ipv6:[fe80::1]:4000"));
  EXPECT_FALSE(IsLoopbackPeer("unix:/tmp/x"));
  EXPECT_FALSE(IsLoopbackPeer("fd:7"));
}

// Both ways of asking the kernel: "/proc" is the netlink sock_diag lookup (the daemon's), any
// other root reads the socket tables as files ("/proc/." reads the real ones).
class RealSocketOwnerTest : public ::testing::TestWithParam<std::string> {
 protected:
  const std::string& proc_root() const { return GetParam(); }

  // A listening socket on 127.0.0.1 at a free port, written to `address`; -1 if none.
  static int ListenOnLoopback(sockaddr_in& address) {
    const int server = socket(AF_INET, SOCK_STREAM, 0);
    address = sockaddr_in{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (server < 0 || bind(server, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        listen(server, 1) != 0 ||
        getsockname(server, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      if (server >= 0) close(server);
      return -1;
    }
    return server;
  }
};

// A real loopback connection: the kernel names this process's uid as the owner of the client
// end, matched on both ends of the connection; once closed (TIME_WAIT), nobody's.
TEST_P(RealSocketOwnerTest, FindsTheUidOfARealClientSocketWhileItIsEstablished) {
  sockaddr_in address{};
  const int server = ListenOnLoopback(address);
  ASSERT_GE(server, 0);
  socklen_t length = sizeof(address);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  sockaddr_in client_address{};
  length = sizeof(client_address);
  ASSERT_EQ(getsockname(client, reinterpret_cast<sockaddr*>(&client_address), &length), 0);
  const std::string peer = absl::StrCat("ipv4:127.0.0.1:", ntohs(client_address.sin_port));
  const std::string listener = absl::StrCat("ipv4:127.0.0.1:", ntohs(address.sin_port));
  const int accepted = accept(server, nullptr, nullptr);
  ASSERT_GE(accepted, 0);

  auto uid = LoopbackTcpOwner(peer, listener, proc_root());
  ASSERT_TRUE(uid.ok()) << uid.status();
  EXPECT_EQ(*uid, geteuid());
  auto accepted_uid = AcceptedLoopbackOwner(accepted, proc_root());
  ASSERT_TRUE(accepted_uid.ok()) << accepted_uid.status();
  EXPECT_EQ(*accepted_uid, geteuid());
  // The same client port towards another server address is another connection: nobody's.
  EXPECT_FALSE(LoopbackTcpOwner(peer, "ipv4:127.0.0.1:1", proc_root()).ok());
  // The client closes first, so its end lingers in TIME_WAIT (owned by uid 0): not an owner.
  close(client);
  close(accepted);
  EXPECT_FALSE(LoopbackTcpOwner(peer, listener, proc_root()).ok());
  close(server);
  // Nobody owns a port that is not connected.
  EXPECT_FALSE(LoopbackTcpOwner("ipv4:127.0.0.1:1", listener, proc_root()).ok());
}

// gRPC's clients use dual-stack sockets: an IPv4 connection listed in tcp6, IPv4-mapped.
TEST_P(RealSocketOwnerTest, FindsADualStackClientSocket) {
  sockaddr_in address{};
  const int server = ListenOnLoopback(address);
  ASSERT_GE(server, 0);
  socklen_t length = sizeof(address);
  const int client = socket(AF_INET6, SOCK_STREAM, 0);
  ASSERT_GE(client, 0);
  sockaddr_in6 mapped{};
  mapped.sin6_family = AF_INET6;
  mapped.sin6_port = address.sin_port;
  ASSERT_EQ(inet_pton(AF_INET6, "::ffff:127.0.0.1", &mapped.sin6_addr), 1);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&mapped), sizeof(mapped)), 0);
  sockaddr_in6 client_address{};
  length = sizeof(client_address);
  ASSERT_EQ(getsockname(client, reinterpret_cast<sockaddr*>(&client_address), &length), 0);
  auto uid = LoopbackTcpOwner(absl::StrCat("ipv4:127.0.0.1:", ntohs(client_address.sin6_port)),
                              absl::StrCat("ipv4:127.0.0.1:", ntohs(address.sin_port)),
                              proc_root());
  ASSERT_TRUE(uid.ok()) << uid.status();
  EXPECT_EQ(*uid, geteuid());
  close(client);
  close(server);
}

INSTANTIATE_TEST_SUITE_P(NetlinkAndTables, RealSocketOwnerTest,
                         ::testing::Values("/proc", "/proc/."),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "/proc" ? "SockDiag" : "ProcTables";
                         });

// The attack that made any local user root: a closed connection's TIME_WAIT line for the same
// client port, owned by uid 0, listed before the live connection. Only the ESTABLISHED line
// whose both ends match counts.
TEST(LoopbackTcpOwnerTest, IgnoresTimeWaitAndOtherConnectionsOfTheSamePort) {
  const std::string root = ::testing::TempDir() + "/fake-proc";
  std::filesystem::create_directories(root + "/net");
  {
    std::ofstream tcp(root + "/net/tcp");
    tcp << "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
           "timeout inode\n"
        // 127.0.0.1:40000 -> 127.0.0.1:7070, TIME_WAIT, uid 0
        << "   0: 0100007F:9C40 0100007F:1B9E 06 00000000:00000000 03:00000000 00000000     0 "
           "       0 0 3 0000000000000000\n"
        // 127.0.0.1:40000 -> 127.0.0.1:9000, ESTABLISHED, uid 0: another connection
        << "   1: 0100007F:9C40 0100007F:2328 01 00000000:00000000 00:00000000 00000000     0 "
           "       0 12 1 0000000000000000\n"
        // the daemon's own end of the connection, owned by the daemon
        << "   2: 0100007F:1B9E 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0 "
           "       0 13 1 0000000000000000\n"
        // the client end: 127.0.0.1:40000 -> 127.0.0.1:7070, ESTABLISHED, uid 1234
        << "   3: 0100007F:9C40 0100007F:1B9E 01 00000000:00000000 00:00000000 00000000  1234 "
           "       0 14 1 0000000000000000\n";
  }
  std::ofstream(root + "/net/tcp6") << "header\n";
  auto uid = LoopbackTcpOwner("ipv4:127.0.0.1:40000", "ipv4:127.0.0.1:7070", root);
  ASSERT_TRUE(uid.ok()) << uid.status();
  EXPECT_EQ(*uid, 1234u);
  // Without the established client line there is no owner, not root.
  {
    std::ofstream tcp(root + "/net/tcp");
    tcp << "header\n"
        << "   0: 0100007F:9C40 0100007F:1B9E 06 00000000:00000000 03:00000000 00000000     0 "
           "       0 0 3 0000000000000000\n";
  }
  EXPECT_FALSE(LoopbackTcpOwner("ipv4:127.0.0.1:40000", "ipv4:127.0.0.1:7070", root).ok());
}

TEST(PeerCredentialRegistryTest, LaterConnectionOnTheSameDescriptorReplaces) {
  PeerCredentialRegistry registry;
  EXPECT_EQ(registry.Find("fd:7"), std::nullopt);
  registry.Record("fd:7", 1000);
  EXPECT_EQ(registry.Find("fd:7"), 1000u);
  registry.Record("fd:7", 1001);
  EXPECT_EQ(registry.Find("fd:7"), 1001u);
}

// An entry holds only while its socket is open; two live sockets under one name identify
// nobody.
TEST(PeerCredentialRegistryTest, ClosedAndAmbiguousConnectionsIdentifyNobody) {
  PeerCredentialRegistry registry;
  int first[2];
  int second[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, first), 0);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, second), 0);
  registry.Record("ipv4:127.0.0.1:40000", 1000, first[0]);
  EXPECT_EQ(registry.Find("ipv4:127.0.0.1:40000"), 1000u);
  registry.Record("ipv4:127.0.0.1:40000", 0, second[0]);
  EXPECT_EQ(registry.Find("ipv4:127.0.0.1:40000"), std::nullopt);
  // Unknown owner: anonymous, not root.
  registry.Record("ipv4:127.0.0.1:40001", std::nullopt, second[1]);
  EXPECT_EQ(registry.Find("ipv4:127.0.0.1:40001"), std::nullopt);
  registry.Record("fd:99", 1000, first[1]);
  close(first[1]);
  EXPECT_EQ(registry.Find("fd:99"), std::nullopt);
  close(first[0]);
  close(second[0]);
  close(second[1]);
}

TEST(UserNameOfUidTest, RootAndUnknown) {
  EXPECT_EQ(UserNameOfUid(0), "root");
  EXPECT_EQ(UserNameOfUid(4000000), "uid:4000000");
}

}  // namespace
}  // namespace gpuprof::daemon
