#include "daemon/process_state.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace gpuprof {
namespace {

// Polls until the kernel reports `expected` (a stop or a wake-up is not instant).
bool Becomes(pid_t pid, const std::string& expected) {
  for (int attempt = 0; attempt < 500; ++attempt) {
    if (DescribeProcessState(pid) == expected) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(DescribeProcessStateTest, SleepingStoppedZombieAndGone) {
  EXPECT_EQ(DescribeProcessState(getpid()), "running");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  EXPECT_TRUE(Becomes(child, "sleeping"));
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  EXPECT_TRUE(Becomes(child, "stopped (by a signal or a debugger)"));
  ASSERT_EQ(kill(child, SIGKILL), 0);
  EXPECT_TRUE(Becomes(child, "a zombie"));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(DescribeProcessState(child), "gone");
}

}  // namespace
}  // namespace gpuprof
