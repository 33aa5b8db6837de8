#include "workloads/custom_kernel/occupancy.h"

#include <gtest/gtest.h>

namespace gpuprof::workloads {
namespace {

// The numbers below are what the CUDA occupancy calculator gives for an H100.
TEST(OccupancyTest, ThreadsPerSmCapALightKernel) {
  const Occupancy occupancy = ComputeOccupancy({.block_threads = 256, .registers_per_thread = 32}, {});
  EXPECT_EQ(occupancy.blocks_per_sm, 8);
  EXPECT_DOUBLE_EQ(occupancy.theoretical, 1.0);
  EXPECT_EQ(occupancy.limiter, "threads per SM");
}

TEST(OccupancyTest, RegistersCapAHeavyKernel) {
  // 128 registers x 32 lanes = 4096 per warp; 16 warps fit; blocks of 8 warps: 2.
  const Occupancy occupancy =
      ComputeOccupancy({.block_threads = 256, .registers_per_thread = 128}, {});
  EXPECT_EQ(occupancy.blocks_per_sm, 2);
  EXPECT_DOUBLE_EQ(occupancy.theoretical, 0.25);
  EXPECT_EQ(occupancy.limiter, "registers");
}

TEST(OccupancyTest, RegistersRoundUpToTheAllocationUnit) {
  // 33 registers: 1056 per warp, allocated as 1280, so 51 warps, 6 blocks of 8 warps.
  const Occupancy occupancy =
      ComputeOccupancy({.block_threads = 256, .registers_per_thread = 33}, {});
  EXPECT_EQ(occupancy.blocks_per_sm, 6);
  EXPECT_EQ(occupancy.limiter, "registers");
}

TEST(OccupancyTest, SharedMemoryCapsWithTheReservedPart) {
  // 48 KiB + 1 KiB reserved per block: 4 blocks in 228 KiB.
  const Occupancy occupancy = ComputeOccupancy(
      {.block_threads = 128, .registers_per_thread = 32, .static_shared_bytes = 16384,
       .dynamic_shared_bytes = 32768},
      {});
  EXPECT_EQ(occupancy.blocks_per_sm, 4);
  EXPECT_DOUBLE_EQ(occupancy.theoretical, 0.25);
  EXPECT_EQ(occupancy.limiter, "shared memory");
}

TEST(OccupancyTest, SmallBlocksHitTheBlockLimit) {
  const Occupancy occupancy = ComputeOccupancy({.block_threads = 32, .registers_per_thread = 16}, {});
  EXPECT_EQ(occupancy.blocks_per_sm, 32);
  EXPECT_DOUBLE_EQ(occupancy.theoretical, 0.5);
  EXPECT_EQ(occupancy.limiter, "blocks per SM");
}

TEST(OccupancyTest, TooManyRegistersForTheBlockFitsNone) {
  const Occupancy occupancy =
      ComputeOccupancy({.block_threads = 1024, .registers_per_thread = 255}, {});
  EXPECT_EQ(occupancy.blocks_per_sm, 0);
  EXPECT_DOUBLE_EQ(occupancy.theoretical, 0);
  EXPECT_EQ(occupancy.limiter, "registers");
}

}  // namespace
}  // namespace gpuprof::workloads
