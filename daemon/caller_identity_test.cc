#include "daemon/caller_identity.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

// A real loopback connection: the kernel's table names this process's uid as the owner of
// the client end.
TEST(LoopbackTcpOwnerTest, FindsTheUidOfARealClientSocket) {
  const int server = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(server, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(server, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(server, 1), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(server, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  sockaddr_in client_address{};
  length = sizeof(client_address);
  ASSERT_EQ(getsockname(client, reinterpret_cast<sockaddr*>(&client_address), &length), 0);
  const std::string peer = absl::StrCat("ipv4:127.0.0.1:", ntohs(client_address.sin_port));

  auto uid = LoopbackTcpOwner(peer);
  ASSERT_TRUE(uid.ok()) << uid.status();
  EXPECT_EQ(*uid, geteuid());
  close(client);
  close(server);
  // Nobody owns a port that is not connected.
  EXPECT_FALSE(LoopbackTcpOwner("ipv4:127.0.0.1:1").ok());
}

// gRPC's clients use dual-stack sockets: an IPv4 connection listed in tcp6, IPv4-mapped.
TEST(LoopbackTcpOwnerTest, FindsADualStackClientSocket) {
  const int server = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(server, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(server, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(server, 1), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(server, reinterpret_cast<sockaddr*>(&address), &length), 0);
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
  auto uid =
      LoopbackTcpOwner(absl::StrCat("ipv4:127.0.0.1:", ntohs(client_address.sin6_port)));
  ASSERT_TRUE(uid.ok()) << uid.status();
  EXPECT_EQ(*uid, geteuid());
  close(client);
  close(server);
}

TEST(PeerCredentialRegistryTest, LaterConnectionOnTheSameDescriptorReplaces) {
  PeerCredentialRegistry registry;
  EXPECT_EQ(registry.Find("fd:7"), std::nullopt);
  registry.Record("fd:7", 1000);
  EXPECT_EQ(registry.Find("fd:7"), 1000u);
  registry.Record("fd:7", 1001);
  EXPECT_EQ(registry.Find("fd:7"), 1001u);
}

TEST(UserNameOfUidTest, RootAndUnknown) {
  EXPECT_EQ(UserNameOfUid(0), "root");
  EXPECT_EQ(UserNameOfUid(4000000), "uid:4000000");
}

}  // namespace
}  // namespace gpuprof::daemon
