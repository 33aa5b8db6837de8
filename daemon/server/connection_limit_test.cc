#include "daemon/server/connection_limit.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <vector>

#include <gtest/gtest.h>

#include "absl/time/clock.h"

namespace gpuprof::daemon {
namespace {

// A connected pair of real sockets; the first end plays the accepted connection.
std::array<int, 2> SocketPair() {
  std::array<int, 2> fds{-1, -1};
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds.data()), 0);
  return fds;
}

TEST(ConnectionLimitTest, RefusesOverTheCapAndAdmitsAgainOnceOneCloses) {
  ConnectionLimit limit(3);
  std::vector<std::array<int, 2>> pairs;
  for (int i = 0; i < 3; ++i) {
    pairs.push_back(SocketPair());
    EXPECT_TRUE(limit.Admit(pairs.back()[0]));
  }
  EXPECT_EQ(limit.live(), 3);
  const auto extra = SocketPair();
  EXPECT_FALSE(limit.Admit(extra[0]));
  EXPECT_EQ(limit.refused(), 1);
  // Closing one frees its place, even though nothing tells the limit.
  close(pairs[1][0]);
  EXPECT_EQ(limit.live(), 2);
  EXPECT_TRUE(limit.Admit(extra[0]));
  EXPECT_EQ(limit.live(), 3);
  EXPECT_EQ(limit.refused(), 1);
  for (const auto& pair : pairs) close(pair[1]);
  close(pairs[0][0]);
  close(pairs[2][0]);
  close(extra[0]);
  close(extra[1]);
}

TEST(ConnectionLimitTest, ADescriptorReusedBySomethingElseIsNotCountedAsTheOldConnection) {
  ConnectionLimit limit(2);
  auto first = SocketPair();
  ASSERT_TRUE(limit.Admit(first[0]));
  const int number = first[0];
  close(first[0]);
  // The lowest free number goes to the next open: a file, not a connection.
  const int file = open("/dev/null", O_RDONLY);
  ASSERT_EQ(file, number);
  EXPECT_EQ(limit.live(), 0);
  close(file);
  close(first[1]);
}

TEST(ConnectionLimitTest, ADescriptorReusedByANewConnectionReplacesTheClosedOne) {
  ConnectionLimit limit(1);
  auto first = SocketPair();
  ASSERT_TRUE(limit.Admit(first[0]));
  const int number = first[0];
  close(first[0]);
  close(first[1]);
  auto second = SocketPair();
  ASSERT_EQ(second[0], number);
  EXPECT_TRUE(limit.Admit(second[0]));
  EXPECT_EQ(limit.live(), 1);
  close(second[0]);
  close(second[1]);
}

TEST(ConnectionLimitTest, AdmitSweepsOutAClosedConnectionByItself) {
  ConnectionLimit limit(2);
  auto first = SocketPair();
  auto second = SocketPair();
  ASSERT_TRUE(limit.Admit(first[0]));
  ASSERT_TRUE(limit.Admit(second[0]));
  close(first[0]);
  // Something else takes the closed connection's number, so the next connection gets another
  // one and only a sweep can find the free place.
  const int file = open("/dev/null", O_RDONLY);
  auto third = SocketPair();
  ASSERT_NE(third[0], file);
  // Sweeps are spaced by kSweepInterval: the place is found within a few of them.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  bool admitted = false;
  while (!(admitted = limit.Admit(third[0])) && absl::Now() < deadline) {
    absl::SleepFor(ConnectionLimit::kSweepInterval);
  }
  EXPECT_TRUE(admitted);
  EXPECT_EQ(limit.live(), 2);
  for (const int fd : {file, first[1], second[0], second[1], third[0], third[1]}) close(fd);
}

// One owner's flood: capped per owner, and once every place is taken the newcomer of another
// owner gets in by evicting the biggest holder's oldest connection, never by being refused.
TEST(ConnectionLimitTest, AFloodOfOneOwnerNeverLocksOutAnother) {
  ConnectionLimit limit(ConnectionLimit::Options{
      .max_connections = 8, .max_per_owner = 4, .reserved_local = 2});
  const ConnectionOwner mallory{.key = "uid:1001"};
  const ConnectionOwner eve{.key = "uid:1002"};
  const ConnectionOwner victim{.key = "uid:1000", .local = true};
  std::vector<std::array<int, 2>> pairs;
  auto admit = [&](const ConnectionOwner& owner) {
    pairs.push_back(SocketPair());
    return limit.Admit(pairs.back()[0], owner);
  };
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(admit(mallory));
  // The per-owner cap: mallory's fifth is refused.
  EXPECT_FALSE(admit(mallory));
  EXPECT_EQ(limit.live_of("uid:1001"), 4);
  // TCP may take 8 - 2 = 6 places.
  EXPECT_TRUE(admit(eve));
  EXPECT_TRUE(admit(eve));
  // The TCP share is full: eve's third evicts mallory's oldest (4 > 2 + 1).
  EXPECT_TRUE(admit(eve));
  EXPECT_EQ(limit.evicted(), 1);
  EXPECT_EQ(limit.live_of("uid:1001"), 3);
  // The evicted connection was shut down: its client end reads end-of-file.
  char byte;
  EXPECT_EQ(recv(pairs[0][1], &byte, 1, MSG_DONTWAIT), 0);
  // The unix socket's reserved places are the victim's.
  EXPECT_TRUE(admit(victim));
  EXPECT_TRUE(admit(victim));
  EXPECT_EQ(limit.live(), 8);
  // Full: the victim's next one evicts from a biggest holder (3, against the victim's 2 + 1:
  // a tie, refused) only when it holds more; here eve and mallory hold 3 each.
  EXPECT_FALSE(admit(victim));
  // Mallory's attempts are refused: it would only trade places with the others.
  EXPECT_FALSE(admit(mallory));
  EXPECT_EQ(limit.live_of("uid:1000"), 2);
  for (const auto& pair : pairs) {
    close(pair[0]);
    close(pair[1]);
  }
}

TEST(ConnectionLimitTest, AVictimWithFewConnectionsAlwaysGetsOne) {
  ConnectionLimit limit(ConnectionLimit::Options{.max_connections = 8, .max_per_owner = 8});
  const ConnectionOwner mallory{.key = "uid:1001"};
  const ConnectionOwner victim{.key = "uid:1000", .local = true};
  std::vector<std::array<int, 2>> pairs;
  auto admit = [&](const ConnectionOwner& owner) {
    pairs.push_back(SocketPair());
    return limit.Admit(pairs.back()[0], owner);
  };
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(admit(mallory));
  EXPECT_FALSE(admit(mallory));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(admit(victim)) << i;
  EXPECT_EQ(limit.live_of("uid:1001"), 5);
  EXPECT_EQ(limit.live(), 8);
  for (const auto& pair : pairs) {
    close(pair[0]);
    close(pair[1]);
  }
}

TEST(ConnectionLimitTest, TheDaemonsOwnUidHasNoPerOwnerCap) {
  ConnectionLimit limit(ConnectionLimit::Options{.max_connections = 10, .max_per_owner = 2});
  const ConnectionOwner self{.key = "uid:0", .exempt = true};
  std::vector<std::array<int, 2>> pairs;
  for (int i = 0; i < 5; ++i) {
    pairs.push_back(SocketPair());
    EXPECT_TRUE(limit.Admit(pairs.back()[0], self));
  }
  for (const auto& pair : pairs) {
    close(pair[0]);
    close(pair[1]);
  }
}

}  // namespace
}  // namespace gpuprof::daemon
