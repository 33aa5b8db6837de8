#include "daemon/server/accepted_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace gpuprof::daemon {
namespace {

// A real loopback connection accepted as the daemon accepts one.
struct LoopbackConnection {
  int listener = -1;
  int client = -1;
  int accepted = -1;
  int client_port = 0;
  ~LoopbackConnection() {
    for (const int fd : {listener, client, accepted}) {
      if (fd >= 0) close(fd);
    }
  }
};

void Connect(LoopbackConnection& connection) {
  connection.listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(connection.listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(connection.listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)),
            0);
  ASSERT_EQ(listen(connection.listener, 4), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(connection.listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  connection.client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(connection.client, reinterpret_cast<sockaddr*>(&address), sizeof(address)),
            0);
  connection.accepted = accept(connection.listener, nullptr, nullptr);
  ASSERT_GE(connection.accepted, 0);
  sockaddr_in client_address{};
  length = sizeof(client_address);
  ASSERT_EQ(
      getsockname(connection.client, reinterpret_cast<sockaddr*>(&client_address), &length), 0);
  connection.client_port = ntohs(client_address.sin_port);
}

TEST(DescribeAcceptedConnectionTest, LoopbackTcpIsOwnedByTheClientsUid) {
  LoopbackConnection connection;
  Connect(connection);
  const AcceptedPeer peer = DescribeAcceptedConnection(connection.accepted, ListenerKind::kTcp);
  EXPECT_EQ(peer.grpc_peer, absl::StrCat("ipv4:127.0.0.1:", connection.client_port));
  ASSERT_TRUE(peer.uid.has_value());
  EXPECT_EQ(*peer.uid, geteuid());
  EXPECT_EQ(peer.owner.key, absl::StrCat("uid:", geteuid()));
  EXPECT_FALSE(peer.owner.local);
  EXPECT_TRUE(peer.owner.exempt);
}

// The client closed before the daemon looked: nobody vouches for the connection any more, so
// it is anonymous (the closed client socket's line, FIN_WAIT or TIME_WAIT, is not taken).
TEST(DescribeAcceptedConnectionTest, AClosedClientLeavesTheConnectionUnidentified) {
  LoopbackConnection connection;
  Connect(connection);
  close(connection.client);
  connection.client = -1;
  absl::SleepFor(absl::Milliseconds(50));
  const AcceptedPeer peer = DescribeAcceptedConnection(connection.accepted, ListenerKind::kTcp);
  EXPECT_FALSE(peer.uid.has_value());
  EXPECT_EQ(peer.owner.key, "unidentified");
}

TEST(DescribeAcceptedConnectionTest, UnixPeerCredentials) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  const AcceptedPeer peer = DescribeAcceptedConnection(pair[0], ListenerKind::kUnix);
  EXPECT_EQ(peer.grpc_peer, absl::StrCat("fd:", pair[0]));
  ASSERT_TRUE(peer.uid.has_value());
  EXPECT_EQ(*peer.uid, geteuid());
  EXPECT_TRUE(peer.owner.local);
  close(pair[0]);
  close(pair[1]);
}

}  // namespace
}  // namespace gpuprof::daemon
