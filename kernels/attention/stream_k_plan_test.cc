#include "kernels/attention/stream_k_plan.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"

namespace gpuprof::attention {
namespace {

double LargestCost(const std::vector<int>& bounds, int unit_tiles,
                   const StreamKPieceCosts& costs) {
  double largest = 0;
  for (size_t k = 0; k + 1 < bounds.size(); ++k) {
    largest =
        std::max(largest, StreamKRangeCost(bounds[k], bounds[k + 1], unit_tiles, costs));
  }
  return largest;
}

std::vector<int> EvenSplit(int tiles, int blocks) {
  std::vector<int> bounds(blocks + 1);
  for (int k = 0; k <= blocks; ++k) bounds[k] = static_cast<int>(int64_t{tiles} * k / blocks);
  return bounds;
}

void ExpectPartition(const std::vector<int>& bounds, int tiles, int unit_tiles, int blocks) {
  ASSERT_EQ(bounds.size(), static_cast<size_t>(blocks + 1));
  EXPECT_EQ(bounds.front(), 0);
  EXPECT_EQ(bounds.back(), tiles);
  for (int k = 0; k < blocks; ++k) {
    EXPECT_GE(bounds[k + 1] - bounds[k], unit_tiles) << "range " << k << " shorter than a unit";
  }
}

TEST(StreamKRangeCostTest, CountsPiecesAndCuts) {
  const StreamKPieceCosts costs{.piece = 2, .hand_over = 10, .take_over = 100};
  EXPECT_DOUBLE_EQ(StreamKRangeCost(0, 16, 16, costs), 16 + 2);
  EXPECT_DOUBLE_EQ(StreamKRangeCost(16, 48, 16, costs), 32 + 2 * 2);
  // Tiles 5-36: the end of unit 0, all of unit 1, the start of unit 2.
  EXPECT_DOUBLE_EQ(StreamKRangeCost(5, 37, 16, costs), 32 + 3 * 2 + 10 + 100);
  EXPECT_DOUBLE_EQ(StreamKRangeCost(8, 16, 16, costs), 8 + 2 + 100);
}

// Head_dim 64 at 2k tokens on 132 SMs: 220 units of 16 KV tiles dealt out. Equal tiles leave a
// third of the blocks with a piece more; the balanced ranges lower the largest cost.
TEST(BalanceStreamKRangesTest, LowersTheLargestCostAtTwoThousandTokens) {
  const int tiles = 220 * 16, unit = 16, blocks = 132;
  const std::vector<int> bounds = BalanceStreamKRanges(tiles, unit, blocks, kStreamKPieceCosts);
  ExpectPartition(bounds, tiles, unit, blocks);
  const double even = LargestCost(EvenSplit(tiles, blocks), unit, kStreamKPieceCosts);
  const double balanced = LargestCost(bounds, unit, kStreamKPieceCosts);
  EXPECT_LT(balanced, even - 0.5);
}

// With nothing but tiles to pay for, balanced is the even split's longest range.
TEST(BalanceStreamKRangesTest, TilesAloneGiveEvenRanges) {
  const int tiles = 176 * 17, unit = 17, blocks = 132;
  const std::vector<int> bounds = BalanceStreamKRanges(tiles, unit, blocks, StreamKPieceCosts{});
  ExpectPartition(bounds, tiles, unit, blocks);
  EXPECT_LE(LargestCost(bounds, unit, StreamKPieceCosts{}), (tiles + blocks - 1) / blocks);
}

// Every shape the grid may deal out (two rounds of units of 1-32 tiles on 100-160 blocks):
// a partition, never costlier than the even split.
TEST(BalanceStreamKRangesTest, NeverWorseThanTheEvenSplit) {
  for (int blocks : {100, 132, 160}) {
    for (int unit = 1; unit <= 32; unit += 3) {
      for (int units : {blocks, blocks + 1, blocks + blocks / 3, 2 * blocks - 1}) {
        const int tiles = units * unit;
        const std::vector<int> bounds =
            BalanceStreamKRanges(tiles, unit, blocks, kStreamKPieceCosts);
        ExpectPartition(bounds, tiles, unit, blocks);
        EXPECT_LE(LargestCost(bounds, unit, kStreamKPieceCosts),
                  LargestCost(EvenSplit(tiles, blocks), unit, kStreamKPieceCosts) + 1e-9)
            << blocks << " blocks, " << units << " units of " << unit;
      }
    }
  }
}

}  // namespace
}  // namespace gpuprof::attention
