// WorkerProcess's launch settings seen from the started process itself (/proc): its niceness,
// its own process group, its environment.
#include "daemon/scheduling/worker_process.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon {
namespace {

using ::testing::Contains;

// Fields of /proc/PID/stat after the command name: [0] is the state, [2] the process group,
// [16] the niceness.
std::vector<std::string> StatFields(pid_t pid) {
  std::ifstream file(absl::StrCat("/proc/", pid, "/stat"));
  std::stringstream text;
  text << file.rdbuf();
  const std::string stat = text.str();
  return absl::StrSplit(stat.substr(stat.rfind(')') + 2), ' ');
}

std::vector<std::string> Environment(pid_t pid) {
  std::ifstream file(absl::StrCat("/proc/", pid, "/environ"));
  std::stringstream text;
  text << file.rdbuf();
  return absl::StrSplit(text.str(), '\0', absl::SkipEmpty());
}

class WorkerProcessTest : public ::testing::Test {
 protected:
  // /bin/sleep stands in for the worker: it never reports, and is killed at the end.
  std::unique_ptr<WorkerProcess> Start(std::optional<int> nice) {
    WorkerLaunch launch{.binary = "/bin/sleep", .args = {"60"}, .env = {"GPUPROF_TEST=1"}};
    launch.nice = nice;
    absl::StatusOr<std::unique_ptr<WorkerProcess>> started = WorkerProcess::Start(
        launch, [](const worker_protocol::WorkerReport&) {},
        [this](const WorkerExit&) { exited_.Notify(); });
    EXPECT_TRUE(started.ok()) << started.status();
    return started.ok() ? std::move(*started) : nullptr;
  }

  // After exec: the environment is the new program's.
  static void AwaitExec(pid_t pid) {
    for (int i = 0; i < 200; ++i) {
      const std::vector<std::string> environment = Environment(pid);
      if (std::find(environment.begin(), environment.end(), "GPUPROF_TEST=1") !=
          environment.end()) {
        return;
      }
      usleep(10'000);
    }
  }

  absl::Notification exited_;
};

TEST_F(WorkerProcessTest, StartsAtTheNicenessAskedForInItsOwnProcessGroup) {
  errno = 0;
  const int own = getpriority(PRIO_PROCESS, 0);
  ASSERT_EQ(errno, 0);
  // A niceness above our own needs no privilege.
  const int asked = std::min(own + 3, 19);
  std::unique_ptr<WorkerProcess> worker = Start(asked);
  ASSERT_NE(worker, nullptr);
  AwaitExec(worker->pid());
  const std::vector<std::string> stat = StatFields(worker->pid());
  ASSERT_GT(stat.size(), 16u);
  EXPECT_EQ(stat[16], absl::StrCat(asked));
  EXPECT_EQ(stat[2], absl::StrCat(worker->pid()));  // its own group, which Kill ends
  EXPECT_THAT(Environment(worker->pid()), Contains("GPUPROF_TEST=1"));
  worker->Kill();
  EXPECT_TRUE(exited_.WaitForNotificationWithTimeout(absl::Seconds(20)));
}

TEST_F(WorkerProcessTest, WithoutANicenessItKeepsTheDaemons) {
  errno = 0;
  const int own = getpriority(PRIO_PROCESS, 0);
  ASSERT_EQ(errno, 0);
  std::unique_ptr<WorkerProcess> worker = Start(std::nullopt);
  ASSERT_NE(worker, nullptr);
  AwaitExec(worker->pid());
  const std::vector<std::string> stat = StatFields(worker->pid());
  ASSERT_GT(stat.size(), 16u);
  EXPECT_EQ(stat[16], absl::StrCat(own));
}

}  // namespace
}  // namespace gpuprof::daemon
