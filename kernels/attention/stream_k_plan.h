// How the Hopper prefill's stream-K grid (head_dim 64) splits the KV tiles it deals out between
// its blocks; no CUDA. The tiles lie on a line cut into units (a unit: one query tile's KV tiles),
// and each block takes a contiguous range of it. A range's cost is its tiles plus what each piece
// (the part of one unit in the range) costs once: filling and draining the tile pipeline, O
// written out, and, where the range starts or ends inside a unit, the partial result merged or
// handed over. Equal ranges of tiles leave the blocks with more pieces last: on the H200 at 2k
// tokens a third of the blocks had four pieces and ended 4 us after the others
// (docs/gpu-runs/attention-prefill-d64-units-h200.md).
#ifndef GPUPROF_KERNELS_ATTENTION_STREAM_K_PLAN_H_
#define GPUPROF_KERNELS_ATTENTION_STREAM_K_PLAN_H_

#include <vector>

namespace gpuprof::attention {

// What a block pays besides its tiles, in tiles' time.
struct StreamKPieceCosts {
  double piece = 0;      // each piece of a unit in the range
  double hand_over = 0;  // the range ends inside a unit: its first tiles' partial goes on
  double take_over = 0;  // the range starts inside a unit: the partial is waited for and merged
};

// Fitted to the H200's per-piece timestamps at 2k tokens (1.57 us a tile; blocks of three
// pieces ending at 76.3 us with a hand-over, 76.8 with a take-over, and of four at 80.7).
inline constexpr StreamKPieceCosts kStreamKPieceCosts{.piece = 1.4, .hand_over = 1.1,
                                                      .take_over = 1.4};

// The cost of tiles [low, high) of a line cut every `unit_tiles` tiles.
double StreamKRangeCost(int low, int high, int unit_tiles, const StreamKPieceCosts& costs);

// Boundaries 0 = b[0] < b[1] < ... < b[blocks] = tiles: block k takes [b[k], b[k + 1]). Each range
// is at least unit_tiles long (so that a unit is cut between two blocks at most), and the largest
// cost is the smallest a greedy fill finds for it (bisection on the bound). Requires
// tiles >= blocks * unit_tiles and unit_tiles >= 1.
std::vector<int> BalanceStreamKRanges(int tiles, int unit_tiles, int blocks,
                                      const StreamKPieceCosts& costs);

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_STREAM_K_PLAN_H_
