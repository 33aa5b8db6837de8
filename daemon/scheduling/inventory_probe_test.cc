#include "daemon/scheduling/inventory_probe.h"

#include <csignal>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon {
namespace {

using ::testing::HasSubstr;

class InventoryProbeTest : public ::testing::Test {
 protected:
  // As gpuprofd does: a worker that died must not take the test with it through a write.
  void SetUp() override { signal(SIGPIPE, SIG_IGN); }
};

// The fake rank worker speaks the real protocol and reports the fake GPUs it is told to.
TEST_F(InventoryProbeTest, AWorkerThatAnswersGivesItsInventory) {
  const auto inventory = ProbeInventory(
      {.launch = {.binary = "tests/ranks/fake_rank_worker", .env = {"FAKE_RANK_GPUS=3"}},
       .measure_copy_bandwidth = false});
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  EXPECT_TRUE(inventory->probe_error().empty()) << inventory->probe_error();
  EXPECT_EQ(inventory->gpus_size(), 3);
  EXPECT_EQ(inventory->host().hostname(), "fake-rank-host");
}

// Nothing could ever run: the daemon refuses to start rather than serve without workers.
TEST_F(InventoryProbeTest, AWorkerThatCannotStartIsAnError) {
  EXPECT_FALSE(ProbeInventory({.launch = {.binary = "/nonexistent/gpuprof_worker"}}).ok());
}

// A process that exits without speaking the protocol: the probe says how it ended.
TEST_F(InventoryProbeTest, AWorkerThatDiesIsDescribed) {
  const auto inventory =
      ProbeInventory({.launch = {.binary = "/bin/false"}, .timeout = absl::Seconds(30)});
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  EXPECT_EQ(inventory->gpus_size(), 0);
  EXPECT_THAT(inventory->probe_error(), HasSubstr("the probe worker exited with code 1"));
}

// One that never answers: the probe gives up at its timeout instead of blocking start-up.
TEST_F(InventoryProbeTest, AWorkerThatDoesNotAnswerTimesOut) {
  const auto inventory = ProbeInventory(
      {.launch = {.binary = "/bin/sleep", .args = {"30"}}, .timeout = absl::Milliseconds(300)});
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  EXPECT_EQ(inventory->gpus_size(), 0);
  EXPECT_THAT(inventory->probe_error(), HasSubstr("did not answer within 300ms"));
}

}  // namespace
}  // namespace gpuprof::daemon
