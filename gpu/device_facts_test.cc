#include "gpu/device_facts.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::gpu {
namespace {

using ::testing::HasSubstr;

TEST(CheckFitsInFreeMemoryTest, SaysNeededAndFree) {
  EXPECT_TRUE(CheckFitsInFreeMemory("index", 1 << 20, "table 1 MiB", int64_t{8} << 30, 0).ok());
  const absl::Status status =
      CheckFitsInFreeMemory("index", int64_t{3} << 30, "table 3.00 GiB", int64_t{2} << 30, 5);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("index needs 3.00 GiB of GPU memory (table 3.00 GiB)"));
  EXPECT_THAT(status.message(), HasSubstr("GPU 5 has 2.00 GiB free"));
}

TEST(CheckFitsInHostMemoryTest, RefusesMoreThanTheHostHas) {
  EXPECT_TRUE(CheckFitsInHostMemory("store", 1 << 20, "the check").ok());
  const absl::Status status = CheckFitsInHostMemory("store", int64_t{1} << 50, "the check");
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("store needs 1048576.00 GiB of host memory for the check"));
}

}  // namespace
}  // namespace gpuprof::gpu
