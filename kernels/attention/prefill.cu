// FlashAttention-2-style prefill over a paged KV cache, on mma.sync m16n8k16 (sm_80+).
//
// One block per (query head, tile of kBlockM query rows, sequence). Each warp owns 16 or 32
// query rows (the two variants below); S = Q K^T and O += P V are accumulated in fp32
// registers, and the softmax is the online one (running max and sum per row), so neither S nor
// P ever reaches global memory. K and V tiles of kBlockN rows are gathered through the page
// table (each row's entry read two tiles ahead into shared memory) with cp.async into shared
// memory, two stages deep, so the next tile is in flight while the current one is multiplied
// (or one K and one V buffer loaded in turn: the staggered variant). Shared-memory rows are
// swizzled (16-byte chunk index XOR row % 8) so that ldmatrix reads are free of bank conflicts.
#include <cuda_runtime.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/cuda_status.h"
#include "kernels/attention/attention_device.cuh"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/head_dims.h"
#include "kernels/attention/prefill.h"
#include "kernels/attention/prefill_kernel_params.h"
#include "kernels/attention/prefill_sm90.h"
#include "kernels/attention/prefill_tile.cuh"

namespace gpuprof::attention {
namespace {

using device::CpAsync16;
using device::CpAsyncCommit;
using device::CpAsyncWait;
using device::FastExp2;
using device::LdMatrixX4;
using device::LdMatrixX4Trans;
using device::MmaM16N8K16;
using device::PackTwo;
using device::PagedSlot;
using device::SharedAddress;
using device::SwizzledOffset;

// KV rows per tile of the two-row-tiles variant. At head_dim 128 a 64-key S tile for 32 rows
// beside O makes ptxas spill ~100 bytes a thread, and is still faster than 32 keys on H100
// (4k-16k causal +6 to +9%, 4k full -1%: docs/benchmarks/RESULTS.md), so 64 at both sizes.
inline constexpr int kTwoRowTilesBlockN = 64;
// KV rows per tile of the wide-head variant (head_dim 256): O alone is 128 registers a thread
// there, so Q stays in shared memory and S is a 32-key tile.
inline constexpr int kWideHeadBlockN = 32;
// The portable default where as many of its blocks fit an SM as of kStaggered's. Two row tiles
// per warp: on H100 faster than 8 warps x 16 rows by 12-17% at 4k-16k causal and 4k full
// (docs/benchmarks/RESULTS.md). Head_dim 64 was checked for correctness only, not timed.
inline constexpr PrefillVariant kDefaultPrefillVariant = PrefillVariant::kTwoRowTiles;

// A kernel variant: warps x row tiles of 16 query rows per warp, KV rows per tile, whether the
// warp's Q fragments stay in registers for the whole KV loop (one row tile at head_dim <= 128)
// or are re-read from shared memory every tile, and the K/V buffering. kRowTiles 2 uses every K
// and V fragment it loads for two MMAs, halving the shared-memory reads per FLOP
// (FlashAttention-2's balance on sm_80). Stages 2: K and V of the next tile load while this
// one is multiplied. Stages 1: one K and one V buffer, staggered - V of tile t loads under
// S = Q K^T and the softmax, K of tile t + 1 under O += P V - a third less shared memory, so
// more blocks fit an SM (on an A100's 164 KB, two instead of one at head_dim 128).
template <int HeadDim, int Warps, int RowTiles, int BlockN, bool QInRegisters, int Stages,
          int QkSteps = 2>
struct PrefillConfig {
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kWarps = Warps;
  static constexpr int kRowTiles = RowTiles;
  static constexpr int kBlockN = BlockN;
  static constexpr bool kQInRegisters = QInRegisters;
  static constexpr int kStages = Stages;
  static constexpr int kQkSteps = QkSteps;  // k16 steps of S = Q K^T per K ldmatrix
  static constexpr int kBlockM = Warps * 16 * RowTiles;
  static constexpr int kThreads = Warps * 32;
  static constexpr int kSharedBytes = (kBlockM + 2 * Stages * BlockN) * HeadDim * 2;
};

// kTwoRowTiles (two stages) and kStaggered (one). The staggered kernel reads K one k16 step at
// a time: on H100 2-5% faster for it, 1-3% slower for the two-stage one
// (docs/benchmarks/RESULTS.md).
template <int kHeadDim, int kStages>
using TwoRowTilesConfig =
    PrefillConfig<kHeadDim, 4, 2, kTwoRowTilesBlockN, false, kStages, kStages == 1 ? 1 : 2>;

template <typename T, typename Config, bool kCausal>
__global__ void __launch_bounds__(Config::kThreads, 1)
    PrefillKernel(const __grid_constant__ PrefillKernelParams p) {
  constexpr int kHeadDim = Config::kHeadDim, kWarps = Config::kWarps;
  constexpr int kRowTiles = Config::kRowTiles, kBlockN = Config::kBlockN;
  constexpr bool kQInRegisters = Config::kQInRegisters;
  constexpr int kStages = Config::kStages, kQkSteps = Config::kQkSteps;
  static_assert(device::kIsAttentionType<T>, "T must be bf16 or fp16");
  static_assert(kQkSteps == 1 || kQkSteps == 2, "one or two k16 steps per K ldmatrix");
  static_assert(IsAttentionHeadDim(kHeadDim), "a head size of kAttentionHeadDims");
  static_assert(kWarps == 4 || kWarps == 8, "4 or 8 warps");
  static_assert(kRowTiles == 1 || kRowTiles == 2, "16 or 32 query rows per warp");
  static_assert(kBlockN == 32 || kBlockN == 64, "32 or 64 KV rows per tile");
  static_assert(!kQInRegisters || kRowTiles == 1, "Q fragments in registers for one row tile");
  static_assert(kStages == 1 || kStages == 2, "staggered single buffers or two stages");
  constexpr int kBlockM = Config::kBlockM;
  constexpr int kThreads = Config::kThreads;
  constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  static_assert((kBlockN * kChunks) % kThreads == 0 && (kBlockM * kChunks) % kThreads == 0);

  extern __shared__ uint4 shared_raw[];
  T* q_smem = reinterpret_cast<T*>(shared_raw);
  T* k_smem = q_smem + kBlockM * kHeadDim;            // [stages][kBlockN][kHeadDim]
  T* v_smem = k_smem + kStages * kBlockN * kHeadDim;  // [stages][kBlockN][kHeadDim]

  const auto [qo_head, seq, q_start, q_len, q_tile_start, kv_len, shift, kv_end, num_kv_tiles] =
      device::LocatePrefillTile<kBlockM, kBlockN, kCausal>(p);
  if (q_tile_start >= q_len) return;
  const int32_t* pages = p.page_indices + p.page_indptr[seq];
  const int kv_head = qo_head / p.group_size;

  // Q tile -> shared memory (zeros past q_len), in the same cp.async group as KV tile 0.
  const T* q_base =
      static_cast<const T*>(p.q) +
      (static_cast<int64_t>(q_start + q_tile_start) * p.num_qo_heads + qo_head) * kHeadDim;
#pragma unroll
  for (int i = threadIdx.x; i < kBlockM * kChunks; i += kThreads) {
    const int row = i / kChunks, chunk = i % kChunks;
    const bool valid = q_tile_start + row < q_len;
    const T* src = q_base + (valid ? row * p.q_row_stride + chunk * 8 : 0);
    CpAsync16(SharedAddress(q_smem + SwizzledOffset<kHeadDim>(row, chunk)), src, valid);
  }

  // The page entry of every row of the next two KV tiles, in shared memory: a tile's loads then
  // wait on no global read, and the entries of tile t + 2 are read while tile t is multiplied.
  __shared__ int32_t row_pages[2][kBlockN];
  auto read_row_page = [&](int kv_tile) {
    const int j = kv_tile * kBlockN + static_cast<int>(threadIdx.x);
    return threadIdx.x < kBlockN && j < kv_end ? __ldg(pages + (j >> p.log2_page_size)) : 0;
  };
  if (threadIdx.x < kBlockN) {
    row_pages[0][threadIdx.x] = read_row_page(0);
    row_pages[1][threadIdx.x] = read_row_page(1);
  }
  __syncthreads();

  const T* k_base = static_cast<const T*>(p.k_cache) + kv_head * kHeadDim;
  const T* v_base = static_cast<const T*>(p.v_cache) + kv_head * kHeadDim;
  // K and/or V rows of `kv_tile` into buffer `stage`.
  auto load_kv_tile = [&](int kv_tile, int stage, bool load_k, bool load_v) {
    T* ks = k_smem + stage * kBlockN * kHeadDim;
    T* vs = v_smem + stage * kBlockN * kHeadDim;
#pragma unroll
    for (int i = threadIdx.x; i < kBlockN * kChunks; i += kThreads) {
      const int row = i / kChunks, chunk = i % kChunks;
      const int j = kv_tile * kBlockN + row;
      const bool valid = j < kv_end;
      int64_t offset = 0;
      if (valid) {
        offset = PagedSlot(row_pages[kv_tile % 2][row], j, p.log2_page_size) * p.kv_row_stride +
                 chunk * 8;
      }
      const int dst = SwizzledOffset<kHeadDim>(row, chunk);
      if (load_k) CpAsync16(SharedAddress(ks + dst), k_base + offset, valid);
      if (load_v) CpAsync16(SharedAddress(vs + dst), v_base + offset, valid);
    }
  };
  load_kv_tile(0, 0, true, kStages == 2);
  CpAsyncCommit();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane >> 2, quad_lane = lane & 3;
  const int warp_row0 = warp * 16 * kRowTiles;
  // Sequence position of row `group` of the warp's first 16-row tile.
  const int qpos0 = q_tile_start + warp_row0 + group + shift;
  const int warp_first_pos = q_tile_start + warp_row0 + shift;

  uint32_t q_frag[kQInRegisters ? kHeadDim / 16 : 1][4];
  float o_acc[kRowTiles][kHeadDim / 8][4];
  float row_max[kRowTiles][2], row_sum[kRowTiles][2];
#pragma unroll
  for (int mt = 0; mt < kRowTiles; ++mt) {
#pragma unroll
    for (int d = 0; d < kHeadDim / 8; ++d) {
      o_acc[mt][d][0] = o_acc[mt][d][1] = o_acc[mt][d][2] = o_acc[mt][d][3] = 0.0f;
    }
    row_max[mt][0] = row_max[mt][1] = -INFINITY;
    row_sum[mt][0] = row_sum[mt][1] = 0.0f;
  }

  for (int t = 0; t < num_kv_tiles; ++t) {
    CpAsyncWait<0>();
    __syncthreads();  // K of tile t is in (and V with two stages); every warp is done with
                      // tile t - 1's V
    if constexpr (kStages == 2) {
      if (t + 1 < num_kv_tiles) load_kv_tile(t + 1, (t + 1) % 2, true, true);
    } else {
      load_kv_tile(t, 0, false, true);
    }
    CpAsyncCommit();
    // Stored after this tile's math into the entries tile t last used (read before the barrier
    // above), so the read's latency hides behind the math.
    const int pending_page = read_row_page(t + 2);

    if constexpr (kQInRegisters) {
      if (t == 0) {
#pragma unroll
        for (int ks = 0; ks < kHeadDim / 16; ++ks) {
          const int row = warp_row0 + (lane & 15);
          const int chunk = ks * 2 + (lane >> 4);
          LdMatrixX4(q_frag[ks], SharedAddress(q_smem + SwizzledOffset<kHeadDim>(row, chunk)));
        }
      }
    }
    const T* ks_tile = k_smem + (t % kStages) * kBlockN * kHeadDim;
    const T* vs_tile = v_smem + (t % kStages) * kBlockN * kHeadDim;

    // S = Q K^T for the warp's rows x kBlockN keys, kQkSteps k16 steps at a time. Two: each K
    // ldmatrix holds one 8-key tile for both steps. One: each holds two 8-key tiles of one
    // step, so only one step's Q fragments are live (fewer registers, ptxas spills less).
    float s[kRowTiles][kBlockN / 8][4];
#pragma unroll
    for (int mt = 0; mt < kRowTiles; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
        s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
      }
    }
#pragma unroll
    for (int k0 = 0; k0 < kHeadDim / 16; k0 += kQkSteps) {
      uint32_t a[kRowTiles][kQkSteps][4];
#pragma unroll
      for (int mt = 0; mt < kRowTiles; ++mt) {
#pragma unroll
        for (int h = 0; h < kQkSteps; ++h) {
          if constexpr (kQInRegisters) {
#pragma unroll
            for (int i = 0; i < 4; ++i) a[0][h][i] = q_frag[k0 + h][i];
          } else {
            const int row = warp_row0 + mt * 16 + (lane & 15);
            const int chunk = (k0 + h) * 2 + (lane >> 4);
            LdMatrixX4(a[mt][h], SharedAddress(q_smem + SwizzledOffset<kHeadDim>(row, chunk)));
          }
        }
      }
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; nt += 3 - kQkSteps) {
        uint32_t b[4];
        // Lanes 8i..8i+7 address matrix i: rows of 8-key tile nt (and nt + 1 with one step),
        // 16-byte chunks of the steps' k columns.
        const int row = kQkSteps == 2 ? nt * 8 + (lane & 7) : (nt + (lane >> 4)) * 8 + (lane & 7);
        const int chunk = kQkSteps == 2 ? k0 * 2 + (lane >> 3) : k0 * 2 + ((lane >> 3) & 1);
        LdMatrixX4(b, SharedAddress(ks_tile + SwizzledOffset<kHeadDim>(row, chunk)));
#pragma unroll
        for (int mt = 0; mt < kRowTiles; ++mt) {
          if constexpr (kQkSteps == 2) {
            MmaM16N8K16<T>(s[mt][nt], a[mt][0], b[0], b[1]);
            MmaM16N8K16<T>(s[mt][nt], a[mt][1], b[2], b[3]);
          } else {
            MmaM16N8K16<T>(s[mt][nt], a[mt][0], b[0], b[1]);
            MmaM16N8K16<T>(s[mt][nt + 1], a[mt][0], b[2], b[3]);
          }
        }
      }
    }

    // Mask keys past the sequence or (causal) past the query.
    const int kv0 = t * kBlockN;
    bool need_mask = kv0 + kBlockN > kv_len;
    if constexpr (kCausal) need_mask = need_mask || kv0 + kBlockN - 1 > warp_first_pos;
    if (need_mask) {
#pragma unroll
      for (int mt = 0; mt < kRowTiles; ++mt) {
#pragma unroll
        for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = kv0 + nt * 8 + quad_lane * 2 + (e & 1);
            const int qpos = qpos0 + mt * 16 + (e >= 2 ? 8 : 0);
            if (col >= kv_len || (kCausal && col > qpos)) s[mt][nt][e] = -INFINITY;
          }
        }
      }
    }

    // Online softmax: rescale what was accumulated by exp2(old max - new max). The running max
    // is kept scaled into base 2, so each probability is one FFMA and one exp2.
#pragma unroll
    for (int mt = 0; mt < kRowTiles; ++mt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float tile_max = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < kBlockN / 8; ++nt) {
          tile_max = fmaxf(tile_max, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
        }
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
        const float new_max = fmaxf(row_max[mt][r], tile_max * p.scale_log2);
        // A row with every key masked so far keeps max -inf; subtract 0 then to avoid NaN.
        const float base = new_max == -INFINITY ? 0.0f : new_max;
        const float correction = FastExp2(row_max[mt][r] - base);
        row_max[mt][r] = new_max;
        row_sum[mt][r] *= correction;
#pragma unroll
        for (int d = 0; d < kHeadDim / 8; ++d) {
          o_acc[mt][d][2 * r] *= correction;
          o_acc[mt][d][2 * r + 1] *= correction;
        }
#pragma unroll
        for (int nt = 0; nt < kBlockN / 8; ++nt) {
          const float p0 = FastExp2(fmaf(s[mt][nt][2 * r], p.scale_log2, -base));
          const float p1 = FastExp2(fmaf(s[mt][nt][2 * r + 1], p.scale_log2, -base));
          s[mt][nt][2 * r] = p0;
          s[mt][nt][2 * r + 1] = p1;
          row_sum[mt][r] += p0 + p1;
        }
      }
    }

    if constexpr (kStages == 1) {
      CpAsyncWait<0>();
      __syncthreads();  // V of tile t is in; every warp is done with K of tile t
      if (t + 1 < num_kv_tiles) load_kv_tile(t + 1, 0, true, false);
      CpAsyncCommit();
    }

    // O += P V: the S accumulators of two adjacent 8-key tiles are the A fragment of a k16 step.
#pragma unroll
    for (int kt = 0; kt < kBlockN / 16; ++kt) {
      uint32_t a[kRowTiles][4];
#pragma unroll
      for (int mt = 0; mt < kRowTiles; ++mt) {
        a[mt][0] = PackTwo<T>(s[mt][2 * kt][0], s[mt][2 * kt][1]);
        a[mt][1] = PackTwo<T>(s[mt][2 * kt][2], s[mt][2 * kt][3]);
        a[mt][2] = PackTwo<T>(s[mt][2 * kt + 1][0], s[mt][2 * kt + 1][1]);
        a[mt][3] = PackTwo<T>(s[mt][2 * kt + 1][2], s[mt][2 * kt + 1][3]);
      }
#pragma unroll
      for (int dt = 0; dt < kHeadDim / 16; ++dt) {
        uint32_t b[4];
        const int row = kt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        const int chunk = dt * 2 + (lane >> 4);
        LdMatrixX4Trans(b, SharedAddress(vs_tile + SwizzledOffset<kHeadDim>(row, chunk)));
#pragma unroll
        for (int mt = 0; mt < kRowTiles; ++mt) {
          MmaM16N8K16<T>(o_acc[mt][2 * dt], a[mt], b[0], b[1]);
          MmaM16N8K16<T>(o_acc[mt][2 * dt + 1], a[mt], b[2], b[3]);
        }
      }
    }
    if (threadIdx.x < kBlockN) row_pages[t % 2][threadIdx.x] = pending_page;
  }

  // Normalise and write O (and the LSE, natural log) for the rows that exist.
#pragma unroll
  for (int mt = 0; mt < kRowTiles; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = row_sum[mt][r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int row = q_tile_start + warp_row0 + mt * 16 + group + 8 * r;
      if (row >= q_len) continue;
      const float inv = 1.0f / sum;
      const int64_t token_head = static_cast<int64_t>(q_start + row) * p.num_qo_heads + qo_head;
      T* out = static_cast<T*>(p.o) + token_head * kHeadDim + quad_lane * 2;
#pragma unroll
      for (int d = 0; d < kHeadDim / 8; ++d) {
        *reinterpret_cast<uint32_t*>(out + d * 8) =
            PackTwo<T>(o_acc[mt][d][2 * r] * inv, o_acc[mt][d][2 * r + 1] * inv);
      }
      if (p.lse != nullptr && quad_lane == 0) {
        p.lse[token_head] = (row_max[mt][r] + log2f(sum)) * device::kLn2;
      }
    }
  }
}

template <typename T, typename Config>
absl::StatusOr<PrefillLaunchInfo> LaunchPrefillTyped(const PrefillKernelParams& params, bool causal,
                                                     int batch, int max_q_len,
                                                     PrefillVariant variant, cudaStream_t stream) {
  auto* kernel = causal ? PrefillKernel<T, Config, true> : PrefillKernel<T, Config, false>;
  CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            Config::kSharedBytes));
  const dim3 grid(params.num_qo_heads, (max_q_len + Config::kBlockM - 1) / Config::kBlockM, batch);
  kernel<<<grid, Config::kThreads, Config::kSharedBytes, stream>>>(params);
  CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return PrefillLaunchInfo{.block_m = Config::kBlockM,
                           .block_n = Config::kBlockN,
                           .warps = Config::kWarps,
                           .stages = Config::kStages,
                           .shared_bytes = Config::kSharedBytes,
                           .blocks = static_cast<int64_t>(grid.x) * grid.y * grid.z,
                           .variant = variant};
}

template <typename T, int kHeadDim>
absl::StatusOr<PrefillLaunchInfo> LaunchPrefillForHeadDim(const AttentionProblem& problem,
                                                          const PrefillKernelParams& params,
                                                          PrefillVariant variant,
                                                          cudaStream_t stream) {
  const bool causal = problem.shape.causal;
  const int batch = problem.lengths.batch();
  const int max_q = problem.lengths.max_q_len();
  if constexpr (kHeadDim == 256) {
    return LaunchPrefillTyped<T, PrefillConfig<kHeadDim, 4, 1, kWideHeadBlockN, false, 2>>(
        params, causal, batch, max_q, PrefillVariant::kWideHead, stream);
  } else {
    switch (variant) {
      case PrefillVariant::kQInRegisters:
        return LaunchPrefillTyped<T, PrefillConfig<kHeadDim, 8, 1, 64, true, 2>>(
            params, causal, batch, max_q, variant, stream);
      case PrefillVariant::kTwoRowTiles:
        return LaunchPrefillTyped<T, TwoRowTilesConfig<kHeadDim, 2>>(params, causal, batch, max_q,
                                                                     variant, stream);
      case PrefillVariant::kStaggered:
        return LaunchPrefillTyped<T, TwoRowTilesConfig<kHeadDim, 1>>(params, causal, batch, max_q,
                                                                     variant, stream);
      default:
        return absl::InvalidArgumentError("unknown prefill variant");
    }
  }
}

template <typename T>
absl::StatusOr<PrefillLaunchInfo> LaunchPrefillForType(const AttentionProblem& problem,
                                                       const PrefillKernelParams& params,
                                                       PrefillVariant variant,
                                                       cudaStream_t stream) {
  return DispatchHeadDim(problem.shape.head_dim, "prefill kernel", [&](auto head_dim) {
    return LaunchPrefillForHeadDim<T, decltype(head_dim)::value>(problem, params, variant, stream);
  });
}

template <typename T, typename Config>
absl::StatusOr<int> BlocksPerSm(bool causal) {
  int blocks = 0;
  CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, causal ? PrefillKernel<T, Config, true> : PrefillKernel<T, Config, false>,
      Config::kThreads, Config::kSharedBytes));
  return blocks;
}

// The two-stage and staggered kernels' resident blocks per SM for `shape` on the current device,
// into `gpu` (kAuto's choice between them); nothing at head_dim 256, where neither runs.
template <typename T, int kHeadDim>
absl::Status FillPortableResidencyTyped(bool causal, PrefillGpu& gpu) {
  ASSIGN_OR_RETURN(gpu.two_row_tiles_blocks_per_sm,
                   (BlocksPerSm<T, TwoRowTilesConfig<kHeadDim, 2>>(causal)));
  ASSIGN_OR_RETURN(gpu.staggered_blocks_per_sm,
                   (BlocksPerSm<T, TwoRowTilesConfig<kHeadDim, 1>>(causal)));
  return absl::OkStatus();
}

absl::Status FillPortableResidency(const AttentionShape& shape, PrefillGpu& gpu) {
  const bool bf16 = shape.dtype == AttentionDtype::kBf16;
  switch (shape.head_dim) {
    case 64:
      return bf16 ? FillPortableResidencyTyped<__nv_bfloat16, 64>(shape.causal, gpu)
                  : FillPortableResidencyTyped<__half, 64>(shape.causal, gpu);
    case 128:
      return bf16 ? FillPortableResidencyTyped<__nv_bfloat16, 128>(shape.causal, gpu)
                  : FillPortableResidencyTyped<__half, 128>(shape.causal, gpu);
    default:
      return absl::OkStatus();
  }
}

}  // namespace

const std::vector<int>& PrefillHeadDims() {
  static const std::vector<int> kDims(std::begin(kAttentionHeadDims), std::end(kAttentionHeadDims));
  return kDims;
}

bool PrefillVariantTakesHeadDim(PrefillVariant variant, int head_dim) {
  switch (variant) {
    case PrefillVariant::kAuto:
    case PrefillVariant::kHopperWgmma:
      return IsAttentionHeadDim(head_dim);
    case PrefillVariant::kWideHead:
      return head_dim == 256;
    case PrefillVariant::kQInRegisters:
    case PrefillVariant::kTwoRowTiles:
    case PrefillVariant::kStaggered:
      return head_dim == 64 || head_dim == 128;
  }
  return false;
}

absl::StatusOr<PrefillVariant> ChoosePrefillVariant(PrefillVariant requested, int head_dim,
                                                    const PrefillGpu& gpu) {
  if (requested == PrefillVariant::kAuto) {
    if (gpu.sm90) return PrefillVariant::kHopperWgmma;
    if (head_dim == 256) return PrefillVariant::kWideHead;
    return gpu.staggered_blocks_per_sm > gpu.two_row_tiles_blocks_per_sm
               ? PrefillVariant::kStaggered
               : kDefaultPrefillVariant;
  }
  const std::string name(PrefillVariantName(requested));
  if (!PrefillVariantTakesHeadDim(requested, head_dim)) {
    std::vector<std::string> dims;
    for (int dim : PrefillHeadDims()) {
      if (PrefillVariantTakesHeadDim(requested, dim)) dims.push_back(absl::StrCat(dim));
    }
    return absl::InvalidArgumentError(absl::StrCat("prefill variant ", name, " takes head_dim ",
                                                   absl::StrJoin(dims, ", "), "; got ", head_dim));
  }
  if (requested == PrefillVariant::kHopperWgmma && !gpu.sm90) {
    return absl::FailedPreconditionError(
        absl::StrCat("prefill variant ", name, " needs a compute capability 9.0 GPU (H100, H200)"));
  }
  return requested;
}

const std::vector<PrefillVariant>& ConcretePrefillVariants() {
  static const std::vector<PrefillVariant> kVariants = {
      PrefillVariant::kQInRegisters, PrefillVariant::kTwoRowTiles, PrefillVariant::kStaggered,
      PrefillVariant::kWideHead, PrefillVariant::kHopperWgmma};
  return kVariants;
}

std::string_view PrefillVariantName(PrefillVariant variant) {
  switch (variant) {
    case PrefillVariant::kAuto:
      return "auto";
    case PrefillVariant::kQInRegisters:
      return "q_in_registers";
    case PrefillVariant::kTwoRowTiles:
      return "two_row_tiles";
    case PrefillVariant::kHopperWgmma:
      return "hopper_wgmma";
    case PrefillVariant::kWideHead:
      return "wide_head";
    case PrefillVariant::kStaggered:
      return "staggered";
  }
  return "unknown";
}

bool PrefillVariantRunsHere(PrefillVariant variant) {
  return variant != PrefillVariant::kHopperWgmma || CurrentDeviceIsSm90();
}

std::string PrefillLaunchInfo::ToString() const {
  return absl::StrFormat(
      "%s block_m=%d block_n=%d warps=%d stages=%d smem=%dB blocks=%d%s%s%s%s%s",
      PrefillVariantName(variant), block_m, block_n, warps, stages, shared_bytes, blocks,
      multicast_kv ? " kv=tma-multicast-x2" : tma_kv ? " kv=tma" : "",
      tiles_first ? " order=tiles-first" : "",
      split_tiles > 0 ? absl::StrFormat(" split_last_wave=%dx2", split_tiles) : "",
      persistent ? " grid=persistent" : "",
      stream_k_units > 0 ? absl::StrFormat(" stream_k_units=%d", stream_k_units) : "");
}

absl::StatusOr<PrefillLaunchInfo> LaunchPrefill(const AttentionProblem& problem,
                                                cudaStream_t stream, PrefillVariant variant,
                                                const PrefillWorkspace& workspace) {
  RETURN_IF_ERROR(ValidateAttentionProblem(problem, PrefillHeadDims()));
  const AttentionShape& shape = problem.shape;
  if (problem.lengths.max_q_len() == 0) {
    return PrefillLaunchInfo{};  // nothing to compute
  }
  PrefillGpu gpu{.sm90 = CurrentDeviceIsSm90()};
  const bool fp8 = shape.dtype == AttentionDtype::kFp8E4m3;
  if (fp8) {
    // One kernel takes fp8: the Hopper one, at its head sizes and page sizes.
    RETURN_IF_ERROR(CheckFp8PrefillShape(shape));
    if (variant != PrefillVariant::kAuto && variant != PrefillVariant::kHopperWgmma) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prefill variant ", std::string(PrefillVariantName(variant)),
          " takes bf16 or fp16; dtype fp8-e4m3 runs in hopper_wgmma (or auto) only"));
    }
    if (!gpu.sm90) {
      return absl::FailedPreconditionError(
          "dtype fp8-e4m3: the fp8 prefill runs on compute capability 9.0 GPUs (H100, H200) "
          "only; use bf16 or fp16 here");
    }
    variant = PrefillVariant::kHopperWgmma;
  }
  if (variant == PrefillVariant::kAuto && !gpu.sm90) {
    RETURN_IF_ERROR(FillPortableResidency(shape, gpu));
  }
  ASSIGN_OR_RETURN(variant, ChoosePrefillVariant(variant, shape.head_dim, gpu));
  const AttentionBuffers& b = problem.buffers;
  const PrefillKernelParams params{
      .q = b.q,
      .k_cache = b.k_cache,
      .v_cache = b.v_cache,
      .o = b.o,
      .lse = b.lse,
      .q_indptr = b.q_indptr,
      .kv_lens = b.kv_lens,
      .page_indptr = b.page_indptr,
      .page_indices = b.page_indices,
      .num_qo_heads = shape.num_qo_heads,
      .group_size = shape.group_size(),
      .log2_page_size = std::countr_zero(static_cast<unsigned>(shape.page_size)),
      .q_row_stride = static_cast<int64_t>(shape.num_qo_heads) * shape.head_dim,
      .kv_row_stride = static_cast<int64_t>(shape.num_kv_heads) * shape.head_dim,
      .scale_log2 = shape.EffectiveScale() * shape.q_scale * shape.k_scale * device::kLog2e,
      .v_scale = shape.v_scale,
  };
  if (fp8) return LaunchPrefillSm90Fp8(problem, params, stream);
  if (variant == PrefillVariant::kHopperWgmma) {
    return LaunchPrefillSm90(problem, params, workspace, stream);
  }
  switch (shape.dtype) {
    case AttentionDtype::kBf16:
      return LaunchPrefillForType<__nv_bfloat16>(problem, params, variant, stream);
    case AttentionDtype::kFp16:
      return LaunchPrefillForType<__half>(problem, params, variant, stream);
    case AttentionDtype::kFp8E4m3:
      break;  // the Hopper fp8 kernel above
  }
  return absl::InvalidArgumentError("dtype has no prefill kernel");
}

}  // namespace gpuprof::attention
