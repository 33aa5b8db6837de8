#include "daemon/connection_limit.h"

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

}  // namespace
}  // namespace gpuprof::daemon
