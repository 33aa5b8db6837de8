#include "kernels/attention/stream_k_plan.h"

#include <algorithm>
#include <cstdint>

namespace gpuprof::attention {
namespace {

// Ranges as long as `bound` allows, each leaving every later range its unit; false where
// `blocks` such ranges do not reach `tiles`. A range's cost is at least its length, so no range
// longer than the bound is tried.
bool FillWithin(double bound, int tiles, int unit_tiles, int blocks,
                const StreamKPieceCosts& costs, std::vector<int>& bounds) {
  bounds.assign(1, 0);
  int low = 0;
  for (int k = 0; k + 1 < blocks; ++k) {
    const int room = tiles - (blocks - 1 - k) * unit_tiles;
    int best = 0;
    const int longest = std::min(room, low + static_cast<int>(bound) + 1);
    for (int high = low + unit_tiles; high <= longest; ++high) {
      if (StreamKRangeCost(low, high, unit_tiles, costs) <= bound) best = high;
    }
    if (best == 0) return false;
    bounds.push_back(best);
    low = best;
  }
  // The last range takes what is left.
  if (StreamKRangeCost(low, tiles, unit_tiles, costs) > bound) return false;
  bounds.push_back(tiles);
  return true;
}

}  // namespace

double StreamKRangeCost(int low, int high, int unit_tiles, const StreamKPieceCosts& costs) {
  const int pieces = (high - 1) / unit_tiles - low / unit_tiles + 1;
  return (high - low) + costs.piece * pieces + (high % unit_tiles != 0 ? costs.hand_over : 0) +
         (low % unit_tiles != 0 ? costs.take_over : 0);
}

std::vector<int> BalanceStreamKRanges(int tiles, int unit_tiles, int blocks,
                                      const StreamKPieceCosts& costs) {
  // The even split (block k from tiles * k / blocks) always fits its own largest cost: the
  // bisection starts there and looks for a smaller bound that still fills.
  std::vector<int> best(blocks + 1);
  double high_bound = 0;
  for (int k = 0; k <= blocks; ++k) best[k] = static_cast<int>(int64_t{tiles} * k / blocks);
  for (int k = 0; k < blocks; ++k) {
    high_bound = std::max(high_bound, StreamKRangeCost(best[k], best[k + 1], unit_tiles, costs));
  }
  double low_bound = static_cast<double>(tiles) / blocks;
  std::vector<int> trial;
  for (int step = 0; step < 24 && high_bound - low_bound > 1e-3; ++step) {
    const double bound = (low_bound + high_bound) / 2;
    if (FillWithin(bound, tiles, unit_tiles, blocks, costs, trial)) {
      best = trial;
      high_bound = bound;
    } else {
      low_bound = bound;
    }
  }
  return best;
}

}  // namespace gpuprof::attention
