// The consumer warpgroups' online softmax, shared by the Hopper prefill kernels (bf16/fp16 in
// prefill_sm90.cu, fp8 in prefill_sm90_fp8.cu). A thread holds rows `group` and group + 8 of its
// warp's 16 and, of every n8 chunk c of the tile's keys, columns 8c + 2q and 8c + 2q + 1 (q the
// lane's index in its quad): s[4c + 2r + e] is row r, column e of chunk c, as wgmma's
// accumulators lay them out. Include from .cu files built for sm_90a.
#ifndef GPUPROF_KERNELS_ATTENTION_PREFILL_SM90_SOFTMAX_CUH_
#define GPUPROF_KERNELS_ATTENTION_PREFILL_SM90_SOFTMAX_CUH_

#include <cmath>

#include "kernels/attention/attention_device.cuh"

namespace gpuprof::attention::sm90 {

// Where one S tile sits: its first key, the sequence's keys, and (causal) the query positions of
// the thread's first row and of its warp's first row.
struct SoftmaxTilePlace {
  int kv0;
  int kv_len;
  int qpos0;
  int warp_first_pos;
  int quad_lane;
};

// Softmax of one tile in place (S -> unnormalised P, base 2); returns through `correction` the
// factor O must be scaled by once the previous P V is done. The running max is kept scaled, so
// each probability is one FFMA and one exp2. kMayMask false: the caller knows that every key of
// the tile is in range (and there is no causal mask), and the tile's code has no branch.
template <int kBlockN, bool kCausal, bool kMayMask = true>
__device__ __forceinline__ void SoftmaxTile(float (&s)[kBlockN / 2], float (&row_max)[2],
                                            float (&row_sum)[2], float (&correction)[2],
                                            const SoftmaxTilePlace& place, float scale_log2) {
  static_assert(kMayMask || !kCausal);
  const int kv0 = place.kv0;
  bool need_mask = kMayMask && kv0 + kBlockN > place.kv_len;
  if constexpr (kCausal) need_mask = need_mask || kv0 + kBlockN - 1 > place.warp_first_pos;
  if (need_mask) {
#pragma unroll
    for (int c = 0; c < kBlockN / 8; ++c) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = kv0 + c * 8 + place.quad_lane * 2 + e;
          if (col >= place.kv_len || (kCausal && col > place.qpos0 + 8 * r)) {
            s[4 * c + 2 * r + e] = -INFINITY;
          }
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < kBlockN / 8; ++c) {
      tile_max = fmaxf(tile_max, fmaxf(s[4 * c + 2 * r], s[4 * c + 2 * r + 1]));
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float new_max = fmaxf(row_max[r], tile_max * scale_log2);
    // A row with every key masked so far keeps max -inf; subtract 0 then to avoid NaN.
    const float base = new_max == -INFINITY ? 0.0f : new_max;
    // Exactly 1 when the maximum did not move (the rescale below is then skipped).
    correction[r] = new_max == row_max[r] ? 1.0f : device::FastExp2(row_max[r] - base);
    row_max[r] = new_max;
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < kBlockN / 8; ++c) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float prob = device::FastExp2(fmaf(s[4 * c + 2 * r + e], scale_log2, -base));
        s[4 * c + 2 * r + e] = prob;
        sum += prob;
      }
    }
    row_sum[r] = row_sum[r] * correction[r] + sum;
  }
}

// At the end of a unit of rows whose next unit's first softmax runs before its O is written
// out: the finished unit's row maxima and sums moved aside for the write-out, the rows started
// afresh for the next.
__device__ __forceinline__ void RestartRows(float (&row_max)[2], float (&row_sum)[2],
                                            float (&done_max)[2], float (&done_sum)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    done_max[r] = row_max[r];
    done_sum[r] = row_sum[r];
    row_max[r] = -INFINITY;
    row_sum[r] = 0.0f;
  }
}

// O *= correction, row by row. Once the running maxima settle, most tiles leave every row's
// correction at exactly 1 and the multiplies (head_dim / 2 a thread: 128 at head_dim 256,
// against 40 exponentials of an 80-key tile) would change nothing; a warp skips them when none
// of its rows needs them.
template <int kHeadDim>
__device__ __forceinline__ void RescaleRows(float (&o)[kHeadDim / 2],
                                            const float (&correction)[2]) {
  if (__any_sync(0xffffffffu, correction[0] != 1.0f || correction[1] != 1.0f)) {
#pragma unroll
    for (int c = 0; c < kHeadDim / 8; ++c) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        o[4 * c + 2 * r] *= correction[r];
        o[4 * c + 2 * r + 1] *= correction[r];
      }
    }
  }
}

}  // namespace gpuprof::attention::sm90

#endif  // GPUPROF_KERNELS_ATTENTION_PREFILL_SM90_SOFTMAX_CUH_
