// Without a GPU: the options FlushedTimer refuses before touching the device.
#include "measure/flushed_timer.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::measure {
namespace {

using ::testing::HasSubstr;

TEST(FlushedTimerTest, RefusesFewerThanOneSample) {
  const auto timer = FlushedTimer::Create({.max_samples = 0});
  EXPECT_EQ(timer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(timer.status().message(), HasSubstr("max_samples: got 0; must be >= 1"));
}

}  // namespace
}  // namespace gpuprof::measure
