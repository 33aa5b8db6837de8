// How the decode kernel divides its work: query rows per block and the number of KV splits
// (flash-decoding). Pure host arithmetic, so CPU tests cover it.
#ifndef GPUPROF_KERNELS_ATTENTION_DECODE_PLAN_H_
#define GPUPROF_KERNELS_ATTENTION_DECODE_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuprof::attention {

// Longest q_len the decode kernel takes (speculative decoding drafts).
inline constexpr int kMaxDecodeQLen = 8;
// Query rows (group members x draft tokens) one decode block keeps in registers.
inline constexpr int kMaxDecodeRowsPerBlock = 8;
// A split shorter than this spends more on its merge than it gains in parallelism.
inline constexpr int kMinKvRowsPerSplit = 256;
inline constexpr int kMaxDecodeSplits = 64;

struct DecodePlanInput {
  int batch = 0;
  int num_kv_heads = 0;
  int group_size = 0;  // query heads per KV head
  int max_q_len = 0;
  int max_kv_len = 0;
  int sm_count = 0;
  int blocks_per_sm = 0;     // resident decode blocks per SM (occupancy)
  // Resident blocks of the kernel that prefetches the next rows (more registers, so often
  // fewer blocks); 0: that kernel is not offered.
  int prefetch_blocks_per_sm = 0;
  // Resident blocks of the tensor-core kernel (decode_mma.h); 0: not offered (a head_dim it
  // is not built for). Whether the rows fit is the plan's rule (PlanMayUseTensorCores).
  int tensor_core_blocks_per_sm = 0;
  // Query rows that kernel holds in one block at this head_dim (TensorCoreRowsPerBlock), and
  // how many such blocks a KV head's rows may take (TensorCoreRowChunks).
  int tensor_core_max_rows = 16;
  int tensor_core_max_row_chunks = 1;
  // From this many rows the plan takes that kernel at any batch (0: only at small batches;
  // TensorCoreRowsAtAnyBatch).
  int tensor_core_rows_at_any_batch = 0;
  int requested_splits = 0;  // 0: choose; otherwise used as given (clamped to the KV length)
};

struct DecodePlan {
  int rows_per_block = 0;  // 1..kMaxDecodeRowsPerBlock: the rows split evenly over row_chunks
  int row_chunks = 0;      // blocks along the query rows of one (sequence, KV head)
  int num_splits = 0;      // blocks along the KV length
  int64_t blocks = 0;      // the whole grid
  bool prefetch = false;   // the kernel that loads the next rows before this rows' math
  bool tensor_cores = false;  // the mma kernel (decode_mma.h): all rows in one block
  bool long_tiles = false;    // that kernel with kMmaDecodeLongTileKeys-key tiles
  bool tma = false;           // that kernel with K and V loaded by TMA
  bool halving_splits = false;  // that kernel's splits by HalvingSplitBegin, the large first
};

// Where split `split` of `num_splits` of a sequence's kv_len keys begins when the splits halve
// (split s from where 1 - 1/2^s of the keys end, the last two the same size, each start on a
// multiple of `tile` keys; kv_len at split num_splits). Where a batch's (sequence, KV head)
// blocks already fill the GPU, even splits all end together, and their blocks finish over a
// spread of up to a quarter of their time (%globaltimer, H200, batch 32 x 32k), the DRAM underfed
// in the last of it; halving splits launched the large ones first leave the small ones for the
// end. The decode kernels compute it on the GPU (nvcc's relaxed constexpr).
constexpr int HalvingSplitBegin(int kv_len, int split, int num_splits, int tile) {
  if (split <= 0) return 0;
  if (split >= num_splits) return kv_len;
  const int begin = (kv_len - (kv_len >> split) + tile - 1) / tile * tile;
  return begin < kv_len ? begin : kv_len;
}

// A prefetching block streams its rows in about 0.8 of the time of one that does not (H100,
// batch 32 x 4k, one wave each: 217 vs 272 us), but fewer of them are resident; the plan
// takes whichever kernel needs less time as waves x per-block cost.
inline constexpr double kPrefetchBlockCost = 0.8;
// Query rows the tensor-core kernel holds in one block: the 16 rows of one mma tile at head_dim
// 64 and 128; at 256, where 16 rows' O would not fit the registers, the 8 columns of one (the
// transposed kernel, whose keys are the tile's rows: decode_mma.cu; also the long-tile kernel
// at 64).
inline constexpr int kTensorCoreRowsPerBlock = 16;
inline constexpr int kTransposedTensorCoreRows = 8;
constexpr int TensorCoreRowsPerBlock(int head_dim) {
  return head_dim == 256 ? kTransposedTensorCoreRows : kTensorCoreRowsPerBlock;
}
// At head_dim 256 a KV head's 9-16 rows take two blocks of 8 (each reads the KV head's K and V;
// the two run side by side, so the second read is mostly the L2's). Elsewhere one block.
constexpr int TensorCoreRowChunks(int head_dim) { return head_dim == 256 ? 2 : 1; }
// The tensor-core kernel is planned when offered and batch x num_kv_heads is at most this:
// measured faster on H100 and H200 for one sequence of 8 KV heads at every KV length (8k-32k:
// +3 to +29%), slower on the H100 from batch 8 (docs/benchmarks/RESULTS.md).
inline constexpr int kTensorCoreMaxSequenceHeads = 8;
// At head_dim 256 the CUDA-core kernels compute every row's 256-wide dot products apart: from a
// GQA group of 4 the tensor-core kernel took 0.27-0.78x their time at every batch and length
// measured (H200, batch 1-128 x 1k-16k, docs/gpu-runs/attention-decode-head-dim-256-h200.md), so
// the plan takes it there at any batch. 0 elsewhere: the batch rule above.
constexpr int TensorCoreRowsAtAnyBatch(int head_dim) { return head_dim == 256 ? 4 : 0; }

// Whether PlanDecode would plan the tensor-core kernel were it offered: the sequence-head's
// blocks hold every row (group_size x max_q_len <= tensor_core_max_rows x
// tensor_core_max_row_chunks), and batch x num_kv_heads
// <= kTensorCoreMaxSequenceHeads or the rows are at least tensor_core_rows_at_any_batch (> 0). Launchers ask before measuring that kernel's residency.
bool PlanMayUseTensorCores(const DecodePlanInput& input);

// Rows per block: group_size * max_q_len in as few chunks of at most kMaxDecodeRowsPerBlock as
// hold them, split evenly (5 rows: one block of 5; 10: two of 5), so no block computes padded
// rows beyond the last chunk's remainder; with q_len 1 and groups up to 8 one block holds the
// whole group, so each KV head is read once. Splits: the most that still fit in one wave of resident blocks
// (batch x kv_heads x row_chunks x splits <= sm_count x blocks_per_sm; 1 when the batch alone
// fills it), but no split shorter than kMinKvRowsPerSplit rows and at most kMaxDecodeSplits.
// A requested count is clamped to 1..min(max_kv_len, kMaxDecodeSplits). With
// prefetch_blocks_per_sm set, both kernels are planned so and the one with the lower
// waves x kPrefetchBlockCost (1 for the plain kernel) is chosen; ties go to prefetching.
// With tensor_core_blocks_per_sm set and PlanMayUseTensorCores, the plan is
// PlanTensorCoreDecode's.
absl::StatusOr<DecodePlan> PlanDecode(const DecodePlanInput& input);

// The tensor-core kernel's plan: one block holds all of a KV head's rows, so splits are planned
// as for one row a block with tensor_core_blocks_per_sm resident.
absl::StatusOr<DecodePlan> PlanTensorCoreDecode(const DecodePlanInput& input);

// Tuned split counts are no shorter than this many keys (two of the tensor-core kernel's
// tiles): below it a block spends its time on the query load and the merge.
inline constexpr int kMinTunedKvRowsPerSplit = 32;
// Tuned split counts go up to this multiple of the plan's own.
inline constexpr int kMaxTunedSplitsOverPlan = 8;

// Split counts TuneDecodeKernel (decode_tuning.h) tries for a kernel whose plan chose `planned_splits`: that count, and the powers
// of two from 1 up to kMaxDecodeSplits that keep kMinTunedKvRowsPerSplit keys a split and are
// at most kMaxTunedSplitsOverPlan x the plan's, ascending. `forced_splits` > 0 (the caller's
// DecodeOptions::num_splits) is the only candidate.
std::vector<int> DecodeSplitCandidates(int planned_splits, int max_kv_len, int forced_splits);

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_DECODE_PLAN_H_
