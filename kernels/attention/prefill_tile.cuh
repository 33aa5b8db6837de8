// Where a prefill block's work lies, for both prefill kernels: its query head, sequence and
// tile of kBlockM query rows (heavy tiles first under a causal mask), and the keys it reads.
// Only .cu files include this.
#ifndef GPUPROF_KERNELS_ATTENTION_PREFILL_TILE_CUH_
#define GPUPROF_KERNELS_ATTENTION_PREFILL_TILE_CUH_

#include <cuda_runtime.h>

#include "kernels/attention/prefill_kernel_params.h"

namespace gpuprof::attention::device {

struct PrefillTile {
  int qo_head;
  int seq;
  int q_start;       // first token of the sequence in Q and O
  int q_len;
  int q_tile_start;  // first query row of this block within the sequence
  int kv_len;
  int shift;         // position of query 0 in the sequence (bottom-right causal mask)
  int kv_end;        // keys past this are not read (causal: past the tile's last row)
  int num_kv_tiles;  // of kBlockN keys
};

// For the block (blockIdx.x = query head, y = query tile, z = sequence; x and y the other way
// round with p.tiles_fastest). A tile that starts at or past q_len has nothing to do
// (q_tile_start >= q_len). kTileOrderChosen: the kernel reads p.tiles_fastest (kept out of the
// others' code: the choice costs a head_dim 128 kernel 1% where the order does not change).
template <int kBlockM, int kBlockN, bool kCausal, bool kTileOrderChosen = false>
__device__ __forceinline__ PrefillTile LocatePrefillTile(const PrefillKernelParams& p) {
  PrefillTile t;
  const bool tiles_fastest = kTileOrderChosen && !kCausal && p.tiles_fastest;
  t.qo_head = tiles_fastest ? blockIdx.y : blockIdx.x;
  // Heavy tiles first: with a causal mask the last query tiles see the most keys.
  const int tile = kCausal ? gridDim.y - 1 - blockIdx.y : tiles_fastest ? blockIdx.x : blockIdx.y;
  t.seq = blockIdx.z;
  t.q_start = p.q_indptr[t.seq];
  t.q_len = p.q_indptr[t.seq + 1] - t.q_start;
  t.q_tile_start = tile * kBlockM;
  t.kv_len = p.kv_lens[t.seq];
  t.shift = t.kv_len - t.q_len;
  t.kv_end = t.kv_len;
  if constexpr (kCausal) t.kv_end = min(t.kv_len, t.q_tile_start + kBlockM + t.shift);
  t.num_kv_tiles = (t.kv_end + kBlockN - 1) / kBlockN;
  return t;
}

// For a block of a split launch (no causal mask; see PrefillKernelParams::whole_tiles): the
// query tile of its cluster and the half of that tile's KV tiles its rank takes (rank 0 the
// first half), with kv_end and num_kv_tiles counted from `kv_base`, the first key it reads.
template <int kBlockM, int kBlockN>
__device__ __forceinline__ PrefillTile LocateSplitPrefillTile(const PrefillKernelParams& p,
                                                              uint32_t rank, int& kv_base) {
  const int linear = p.whole_tiles + blockIdx.x / 2;
  PrefillTile t;
  t.qo_head = linear % p.num_qo_heads;
  const int tile = (linear / p.num_qo_heads) % p.split_q_tiles;
  t.seq = linear / (p.num_qo_heads * p.split_q_tiles);
  t.q_start = p.q_indptr[t.seq];
  t.q_len = p.q_indptr[t.seq + 1] - t.q_start;
  t.q_tile_start = tile * kBlockM;
  t.kv_len = p.kv_lens[t.seq];
  t.shift = t.kv_len - t.q_len;
  const int tiles = (t.kv_len + kBlockN - 1) / kBlockN;
  const int first = rank == 0 ? 0 : tiles / 2, end = rank == 0 ? tiles / 2 : tiles;
  kv_base = first * kBlockN;
  t.kv_end = min(t.kv_len, end * kBlockN) - kv_base;
  t.num_kv_tiles = end - first;
  return t;
}

}  // namespace gpuprof::attention::device

#endif  // GPUPROF_KERNELS_ATTENTION_PREFILL_TILE_CUH_
