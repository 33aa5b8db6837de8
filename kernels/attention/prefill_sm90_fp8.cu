// fp8 (e4m3) prefill for Hopper (sm_90a) over the paged KV cache: Q, K and V stored as e4m3 with
// a dequantisation scale per tensor, O written in bf16. The same plan as the bf16/fp16 kernel in
// prefill_sm90.cu (a producer warpgroup, two consumer warpgroups of 64 query rows taking turns,
// K freed an iteration before V), with what fp8 wgmma changes:
//
// - wgmma reads 8-bit operands K-major only. S = Q K^T is K-major already (head_dim is
//   contiguous in Q and K), but O += P V needs V with the keys contiguous: V^T. TMA brings V
//   as it is stored into a staging buffer, and producer warps 1-3 transpose it into V^T
//   (ldmatrix.trans, byte permutes, stmatrix) before the consumers' P V reads it.
// - P goes from the S accumulators to e4m3 A fragments without moving between threads: an
//   accumulator thread holds keys 2q, 2q+1, 8+2q, 9+2q of a 16-key group (q = lane % 4), where
//   the A fragment wants k-positions 4q..4q+3. The transpose writes key 2q + (i&1) + 8(i>>1) of
//   each 16 at position 4q + i of V^T, so the product sums over the same keys.
// - A k-step is 32 elements (32 bytes), so a 128-byte swizzled row holds 128 of head_dim or
//   128 keys: Q, K, the staging buffer and V^T share one layout and one descriptor form (at
//   head_dim 64 Q, K and the staging buffer have 64-byte rows and the 64-byte swizzle).
// - The scales: q_scale * k_scale folds into the softmax's scale, v_scale into the final 1/sum.
//   P is in [0, 1] and is rounded to e4m3 as it is (3 mantissa bits); the row sums add the
//   fp32 probabilities.
//
// Every swizzled tile has rows of 128 bytes, 16-byte chunk index XOR row % 8, wider rows in
// 128-byte slabs, every tile on a 1024-byte boundary (what TMA's and wgmma's 128-byte swizzle
// agree on). head_dim 64, 128 and 256; pages of a multiple of 16 rows (the TMA boxes).
//
// Measured (docs/gpu-runs/attention-fp8-prefill-h100-h200.md, H100 and H200): 1.07-1.29x the
// bf16 kernel at head_dim 128, 1.15-1.18x at 256, level at 64. Transposing by 4-byte words made
// fp8 slower than bf16 (0.58-0.87x); ldmatrix/stmatrix turned that around. At head_dim 64 the
// consumers do not take turns (13%) and two transpose steps are in flight (6%); both changes
// that sped the transposer up cost head_dim 128 12%, so it keeps one step and the zeroing of
// the last tile's rows in shared memory rather than a mask in registers.
#include <cuda.h>  // CUtensorMap and its enums (libcuda is not linked: common/cuda_driver_entry.h)
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/attention/attention_device.cuh"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/hopper_async.cuh"
#include "kernels/attention/prefill.h"
#include "kernels/attention/prefill_kernel_params.h"
#include "kernels/attention/prefill_sm90.h"
#include "kernels/attention/prefill_sm90_pipeline.cuh"
#include "kernels/attention/prefill_sm90_softmax.cuh"
#include "kernels/attention/prefill_tile.cuh"

namespace gpuprof::attention {
namespace {

using device::CpAsync16;
using device::CpAsyncWait;
using device::PackTwo;
using device::PagedSlot;
using device::SharedAddress;
using sm90::CpAsyncArriveOn;
using sm90::Descriptor;
using sm90::EncodeTiledEntry;
using sm90::FenceProxyAsync;
using sm90::MbarrierArrive;
using sm90::MbarrierArriveExpectBytes;
using sm90::MbarrierInit;
using sm90::MbarrierWait;
using sm90::PinRegisters;
using sm90::TmaLoad3d;
using sm90::WgmmaCommit;
using sm90::WgmmaFence;
using sm90::WgmmaWait;

inline constexpr int kFp8BlockM = 128;  // two consumer warpgroups of 64 query rows
inline constexpr int kFp8BlockN = 128;  // keys a tile: one 128-byte row of V^T
inline constexpr int kFp8Stages = 2;    // K and V^T tiles in flight
inline constexpr int kFp8Staging = 2;   // V tiles as loaded, waiting for the transpose
inline constexpr int kFp8Threads = 384;
// Registers a thread after setmaxnreg: 128 x 40 + 256 x 232 <= 65536; at head_dim 256 (O 128,
// S 64 and P 16 a consumer thread) 128 x 24 + 256 x 240, which the transposers fit.
template <int kHeadDim>
inline constexpr int kFp8ProducerRegistersFor = kHeadDim == 256 ? 24 : 40;
template <int kHeadDim>
inline constexpr int kFp8ConsumerRegistersFor = kHeadDim == 256 ? 240 : 232;
inline constexpr int kTransposeWarps = 3;  // producer warps 1-3; warp 0 issues the TMA loads
inline constexpr int kRowBytes = 128;      // one swizzled row
inline constexpr int kAlign = 1024;        // the swizzle pattern repeats every 8 rows
inline constexpr int kFp8BoxRows = 16;     // K/V rows a TMA box holds (inside one page)

// Up to head_dim 128 O has its own buffer; at 256 there is no room and O goes through the
// staging buffers once the transposers are done with them (a named barrier hands them over).
template <int kHeadDim>
inline constexpr bool kFp8OwnOutputFor = kHeadDim <= 128;

// Q, then the K stages, the V staging buffers and the V^T stages: every one a 128 x head_dim
// byte tile (V^T is head_dim rows of 128 keys); then O's 128 x head_dim bf16 where it has its
// own.
template <int kHeadDim>
constexpr int Fp8SharedBytes() {
  return (1 + 2 * kFp8Stages + kFp8Staging) * kFp8BlockN * kHeadDim +
         (kFp8OwnOutputFor<kHeadDim> ? kFp8BlockM * kHeadDim * 2 : 0) + kAlign;
}
static_assert(Fp8SharedBytes<256>() <= 227 * 1024);

// Byte offset of 16-byte chunk `chunk` of row `row` in a tile of `rows` rows swizzled in
// kRow-byte slabs: 128 (chunk index XOR row % 8) or 64 (XOR (row / 2) % 4, head_dim 64's Q and
// K), as TMA writes them and wgmma reads them.
template <int kRow>
__device__ __forceinline__ int SwizzledByte(int rows, int row, int chunk) {
  constexpr int kRowChunks = kRow / 16;
  const int slab = chunk / kRowChunks, c = chunk % kRowChunks;
  const int phase = kRow == 128 ? row & 7 : (row >> 1) & 3;
  return (slab * rows + row) * kRow + ((c ^ phase) << 4);
}

// Four floats as e4m3 in one register, the first in the low byte (round to nearest, saturating
// at 448).
__device__ __forceinline__ uint32_t PackFp8x4(float a, float b, float c, float d) {
  uint16_t low, high;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(low) : "f"(b), "f"(a));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(high) : "f"(d), "f"(c));
  uint32_t packed;
  asm("mov.b32 %0, {%1, %2};\n" : "=r"(packed) : "h"(low), "h"(high));
  return packed;
}

// S (m64n128, fp32) [+]= Q (64x32 e4m3 in registers) * K^T (32x128 from shared memory).
__device__ __forceinline__ void WgmmaFp8QkFromRegisters(float (&d)[64], const uint32_t (&a)[4],
                                                        uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " GPUPROF_WGMMA_ACC64_REGS
               ", {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
               : GPUPROF_WGMMA_ACC64_OPERANDS
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

// S (m64n128, fp32) [+]= Q (64x32 e4m3 from shared memory) * K^T (32x128 from shared memory).
__device__ __forceinline__ void WgmmaFp8QkFromShared(float (&d)[64], uint64_t desc_a,
                                                     uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " GPUPROF_WGMMA_ACC64_REGS
               ", %64, %65, p, 1, 1;\n}\n"
               : GPUPROF_WGMMA_ACC64_OPERANDS
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// O (m64nN, fp32) += P (64x32 e4m3 in registers) * V (32xN, from V^T in shared memory).
template <int N>
__device__ __forceinline__ void WgmmaFp8Pv(float (&d)[N / 2], const uint32_t (&a)[4],
                                           uint64_t desc_b) {
  static_assert(N == 64 || N == 128 || N == 256);
  if constexpr (N == 256) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 " GPUPROF_WGMMA_ACC128_REGS
        ", {%128, %129, %130, %131}, %132, p, 1, 1;\n}\n"
        : GPUPROF_WGMMA_ACC128_OPERANDS
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
  } else if constexpr (N == 64) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " GPUPROF_WGMMA_ACC32_REGS
        ", {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
        : GPUPROF_WGMMA_ACC32_OPERANDS
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " GPUPROF_WGMMA_ACC64_REGS
        ", {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
        : GPUPROF_WGMMA_ACC64_OPERANDS
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
  }
}

struct Fp8KvTensorMaps {
  CUtensorMap k;
  CUtensorMap v;
};

template <int kHeadDim, bool kCausal>
__global__ void __launch_bounds__(kFp8Threads, 1)
    PrefillSm90Fp8Kernel(const __grid_constant__ PrefillKernelParams p,
                         const __grid_constant__ Fp8KvTensorMaps maps) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256);
  constexpr int kBlockM = kFp8BlockM;
  constexpr int kBlockN = kFp8BlockN;
  constexpr int kStages = kFp8Stages;
  constexpr int kStaging = kFp8Staging;
  constexpr int kConsumerWarps = 8;
  // Named barriers: 0 is __syncthreads, 1 and 2 the turns, 3 and 4 each consumer's own, 5
  // the transposers', 6 the staging buffers' hand-over to O (head_dim 256).
  constexpr int kOwnBarrier0 = 3;
  constexpr int kTransposeBarrier = 5;
  constexpr int kHandOverBarrier = 6;
  constexpr int kHandOverThreads = 32 * kTransposeWarps + 256;
  // Q, K and V as loaded: rows of head_dim bytes in slabs of kQkRow (64 at head_dim 64).
  constexpr int kQkRow = kHeadDim < kRowBytes ? kHeadDim : kRowBytes;
  constexpr int kSlabs = kHeadDim / kQkRow;
  constexpr int kChunks = kHeadDim / 16;  // 16-byte chunks a Q/K/V row
  constexpr uint32_t kTileBytes = kBlockN * kHeadDim;
  constexpr uint32_t kGroupBytes = 8 * kRowBytes;

  extern __shared__ uint8_t shared_raw[];
  // k_full/vs_full: TMA landed K / V of a tile; vt_full: the transposers wrote its V^T.
  // k_empty: both consumers' S of the stage is done; vs_empty: the transposers have read the
  // staging buffer; vt_empty: both consumers' P V of the stage is done.
  __shared__ uint64_t q_full, k_full[kStages], k_empty[kStages], vt_full[kStages],
      vt_empty[kStages], vs_full[kStaging], vs_empty[kStaging];
  const uint32_t raw_address = SharedAddress(shared_raw);
  uint8_t* q_smem = shared_raw + (((raw_address + kAlign - 1) & ~(kAlign - 1)) - raw_address);
  uint8_t* k_smem = q_smem + kBlockM * kHeadDim;     // [stages][slabs][kBlockN][kQkRow]
  uint8_t* vs_smem = k_smem + kStages * kTileBytes;  // [staging][slabs][kBlockN][kQkRow]
  uint8_t* vt_smem = vs_smem + kStaging * kTileBytes;  // [stages][kHeadDim][128 keys]

  const auto [qo_head, seq, q_start, q_len, q_tile_start, kv_len, shift, kv_end, num_kv_tiles] =
      device::LocatePrefillTile<kBlockM, kBlockN, kCausal>(p);
  if (q_tile_start >= q_len) return;

  if (threadIdx.x == 0) {
    MbarrierInit(SharedAddress(&q_full), 128);
#pragma unroll
    for (int stage = 0; stage < kStages; ++stage) {
      MbarrierInit(SharedAddress(&k_full[stage]), 1);
      MbarrierInit(SharedAddress(&k_empty[stage]), kConsumerWarps);
      MbarrierInit(SharedAddress(&vt_full[stage]), kTransposeWarps);
      MbarrierInit(SharedAddress(&vt_empty[stage]), kConsumerWarps);
    }
#pragma unroll
    for (int buffer = 0; buffer < kStaging; ++buffer) {
      MbarrierInit(SharedAddress(&vs_full[buffer]), 1);
      MbarrierInit(SharedAddress(&vs_empty[buffer]), kTransposeWarps);
    }
  }
  __syncthreads();
  const int warp_group = threadIdx.x / 128;

  if (warp_group == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kFp8ProducerRegistersFor<kHeadDim>));
    const int thread = threadIdx.x;
    const int warp = thread / 32, lane = thread % 32;
    const uint8_t* q_base =
        static_cast<const uint8_t*>(p.q) +
        (static_cast<int64_t>(q_start + q_tile_start) * p.num_qo_heads + qo_head) * kHeadDim;
#pragma unroll 4
    for (int k = 0; k < kBlockM * kChunks / 128; ++k) {
      const int i = thread + k * 128;
      const int row = i / kChunks, chunk = i % kChunks;
      const bool valid = q_tile_start + row < q_len;
      const uint8_t* src = q_base + (valid ? row * p.q_row_stride + chunk * 16 : 0);
      CpAsync16(SharedAddress(q_smem + SwizzledByte<kQkRow>(kBlockM, row, chunk)), src, valid);
    }
    CpAsyncArriveOn(SharedAddress(&q_full));

    if (warp == 0) {
      // Lane b loads box b (rows 16b..16b + 15) of each tile's K and V, every slab; lane 0
      // announces the bytes first. Boxes from kv_end on are not loaded: the consumers mask
      // those keys and the transposers write zeros for those V rows.
      constexpr int kBoxes = kBlockN / kFp8BoxRows;
      constexpr uint32_t kBoxBytes = kFp8BoxRows * kQkRow;
      const int32_t* pages = p.page_indices + p.page_indptr[seq];
      const int kv_head = qo_head / p.group_size;
      auto read_page = [&](int t) {
        const int j = t * kBlockN + lane * kFp8BoxRows;
        return lane < kBoxes && j < kv_end ? __ldg(pages + (j >> p.log2_page_size)) : 0;
      };
      int next_page = read_page(0);
      for (int t = 0; t < num_kv_tiles; ++t) {
        const int page = next_page;
        if (t + 1 < num_kv_tiles) next_page = read_page(t + 1);
        const int j = t * kBlockN + lane * kFp8BoxRows;
        const int boxes = min(kBoxes, (kv_end - t * kBlockN + kFp8BoxRows - 1) / kFp8BoxRows);
        const uint32_t tile_bytes = boxes * kSlabs * kBoxBytes;
        const int slot = static_cast<int>(PagedSlot(page, j, p.log2_page_size));
        auto load = [&](const CUtensorMap& map, uint8_t* tile, uint64_t* full) {
          const uint32_t barrier = SharedAddress(full);
          if (lane == 0) MbarrierArriveExpectBytes(barrier, tile_bytes);
          __syncwarp();
          if (lane < boxes) {
#pragma unroll
            for (int slab = 0; slab < kSlabs; ++slab) {
              TmaLoad3d(SharedAddress(tile + (slab * kBlockN + lane * kFp8BoxRows) * kQkRow), map,
                        slab * kQkRow, kv_head, slot, barrier);
            }
          }
        };
        const int stage = t % kStages, buffer = t % kStaging;
        if (t >= kStages) MbarrierWait(SharedAddress(&k_empty[stage]), (t / kStages - 1) & 1);
        load(maps.k, k_smem + stage * kTileBytes, &k_full[stage]);
        if (t >= kStaging) MbarrierWait(SharedAddress(&vs_empty[buffer]), (t / kStaging - 1) & 1);
        load(maps.v, vs_smem + buffer * kTileBytes, &vs_full[buffer]);
      }
      CpAsyncWait<0>();
      return;
    }

    // Warps 1-3 transpose each V tile into V^T, a step of 16 keys x 32 columns at a time: one
    // ldmatrix.trans of four 8 x 8 b16 matrices (keys 0-7 and 8-15 of the group, 16 columns
    // each) leaves a lane with two keys (2q, 2q+1 or 8+2q, 9+2q) x two columns (2c, 2c+1) per
    // register; byte permutes turn two of those registers into one column's four keys 2q, 2q+1,
    // 8+2q, 9+2q, which is positions 4q..4q+3 of V^T's row as the P fragments expect; one
    // stmatrix writes the four 16-byte rows. Lanes with c >= 4 swap their even and odd columns
    // between the stored matrices, so that each matrix's eight rows fall in eight different
    // 16-byte chunks of the swizzle (no bank conflicts); the loads are conflict-free as they are.
    constexpr int kKeyGroups = kBlockN / 16;
    constexpr int kSteps = kKeyGroups * (kHeadDim / 32);
    const int transposer = warp - 1;
    const int c8 = lane >> 2;
    const int matrix = lane >> 3, matrix_row = lane & 7;
    // Which bytes of a pair of ldmatrix registers hold the even column (0x6420) and the odd
    // (0x7531); XOR 0x1111 swaps one for the other.
    const uint32_t swap = c8 < 4 ? 0u : 0x1111u;
    // The rows this lane addresses: for ldmatrix key 8 * (matrix & 1) + matrix_row of the group
    // in 16-byte chunk matrix >> 1 of the pair; for stmatrix column 16 * (matrix >> 1) + 2 *
    // matrix_row (+1 for the odd matrices, swapped past row 4) of the pair.
    const int load_key = 8 * (matrix & 1) + matrix_row;
    const int store_column =
        16 * (matrix >> 1) + 2 * matrix_row + ((matrix & 1) ^ (matrix_row >= 4 ? 1 : 0));
    for (int t = 0; t < num_kv_tiles; ++t) {
      const int stage = t % kStages, buffer = t % kStaging;
      MbarrierWait(SharedAddress(&vs_full[buffer]), (t / kStaging) & 1);
      if (t >= kStages) MbarrierWait(SharedAddress(&vt_empty[stage]), (t / kStages - 1) & 1);
      const int valid_keys = kv_end - t * kBlockN;  // rows from here on were not loaded
      const uint32_t staged = SharedAddress(vs_smem + buffer * kTileBytes);
      const uint32_t transposed = SharedAddress(vt_smem + stage * kTileBytes);
      if (valid_keys < kBlockN) {
        // The last tile: its rows from kv_end on become zeros, not whatever the buffer holds
        // (P is 0 there, but 0 x NaN is NaN), once every transposer is done with the tiles
        // before and before any transposes this one. (Masking the bytes in registers instead
        // cost 12% at head_dim 128, H200.)
        asm volatile("bar.sync %0, %1;\n" ::"n"(kTransposeBarrier), "n"(32 * kTransposeWarps)
                     : "memory");
        uint8_t* tile = vs_smem + buffer * kTileBytes;
        for (int i = thread - 32; i < (kBlockN - valid_keys) * kChunks; i += 32 * kTransposeWarps) {
          const int key = valid_keys + i / kChunks, chunk = i % kChunks;
          *reinterpret_cast<uint4*>(tile + SwizzledByte<kQkRow>(kBlockN, key, chunk)) =
              uint4{0, 0, 0, 0};
        }
        asm volatile("bar.sync %0, %1;\n" ::"n"(kTransposeBarrier), "n"(32 * kTransposeWarps)
                     : "memory");
      }
      auto load = [&](int step, uint32_t(&r)[4]) {
        const int key_group = step % kKeyGroups, column_pair = step / kKeyGroups;
        asm volatile(
            "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
            : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
            : "r"(staged + SwizzledByte<kQkRow>(kBlockN, key_group * 16 + load_key,
                                                 2 * column_pair + (matrix >> 1)))
            : "memory");
      };
      auto store = [&](int step, const uint32_t(&r)[4]) {
        const int key_group = step % kKeyGroups, column_pair = step / kKeyGroups;
        const int column = 32 * column_pair + store_column;
        asm volatile(
            "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                transposed + column * kRowBytes + ((key_group ^ (column & 7)) << 4)),
            "r"(__byte_perm(r[0], r[1], 0x6420u ^ swap)),
            "r"(__byte_perm(r[0], r[1], 0x7531u ^ swap)),
            "r"(__byte_perm(r[2], r[3], 0x6420u ^ swap)),
            "r"(__byte_perm(r[2], r[3], 0x7531u ^ swap))
            : "memory");
      };
      // kInFlight steps at a time: their loads are all issued before the first store, so that
      // the loads' latencies overlap (the asm statements keep their order). Two paid at head_dim
      // 64 (4k: 374 -> 351 us full) but cost 12% at 128 (H200); at 256 the producer's 24
      // registers hold one.
      constexpr int kInFlight = kHeadDim == 64 ? 2 : 1;
#pragma unroll 1
      for (int step = transposer; step < kSteps; step += kInFlight * kTransposeWarps) {
        uint32_t r[kInFlight][4];
#pragma unroll
        for (int i = 0; i < kInFlight; ++i) {
          if (step + i * kTransposeWarps < kSteps) load(step + i * kTransposeWarps, r[i]);
        }
#pragma unroll
        for (int i = 0; i < kInFlight; ++i) {
          if (step + i * kTransposeWarps < kSteps) store(step + i * kTransposeWarps, r[i]);
        }
      }
      // The writes reach wgmma through the async proxy.
      FenceProxyAsync();
      __syncwarp();
      if (lane == 0) {
        MbarrierArrive(SharedAddress(&vt_full[stage]));
        MbarrierArrive(SharedAddress(&vs_empty[buffer]));
      }
    }
    if constexpr (!kFp8OwnOutputFor<kHeadDim>) {
      asm volatile("bar.arrive %0, %1;\n" ::"n"(kHandOverBarrier), "n"(kHandOverThreads)
                   : "memory");
    }
    CpAsyncWait<0>();
    return;
  }

  // The consumers: two warpgroups of 64 query rows each.
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kFp8ConsumerRegistersFor<kHeadDim>));
  const int consumer = warp_group - 1;
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int group = lane >> 2, quad_lane = lane & 3;
  const int warp_row0 = consumer * 64 + warp * 16;
  const int qpos0 = q_tile_start + warp_row0 + group + shift;
  const int warp_first_pos = q_tile_start + warp_row0 + shift;
  auto wait_k = [&](int t) {
    MbarrierWait(SharedAddress(&k_full[t % kStages]), (t / kStages) & 1);
  };
  auto wait_vt = [&](int t) {
    MbarrierWait(SharedAddress(&vt_full[t % kStages]), (t / kStages) & 1);
  };
  auto release = [&](uint64_t* empty, int t) {
    __syncwarp();
    if (lane == 0) MbarrierArrive(SharedAddress(&empty[t % kStages]));
  };
  // Ping-pong turns (sm90::ConsumerTurns). At head_dim 64 the consumers do not take turns: a
  // tile's multiplies there are too short to hide the other consumer's softmax, and waiting for
  // the turn cost 13% (H200, 4k).
  const sm90::ConsumerTurns<2> turns(consumer);
  constexpr bool kPingPong = kHeadDim != 64;
  auto take_turn = [&]() {
    if constexpr (kPingPong) turns.Take();
  };
  auto pass_turn = [&]() {
    if constexpr (kPingPong) turns.Pass();
  };
  if (consumer == 1) pass_turn();

  // Descriptors, all K-major: a k-step of 32 bytes inside a 128-byte slab moves the start by
  // 32 bytes; V^T's rows are head_dim, its k the 128 keys of one slab.
  const uint64_t q_desc0 = Descriptor<kQkRow>(SharedAddress(q_smem) + consumer * 64 * kQkRow,
                                              kQkRow, 8 * kQkRow);
  const uint64_t k_desc0 = Descriptor<kQkRow>(SharedAddress(k_smem), kQkRow, 8 * kQkRow);
  const uint64_t vt_desc0 = Descriptor(SharedAddress(vt_smem), kRowBytes, kGroupBytes);
  constexpr int kStepsPerSlab = kQkRow / 32;
  auto q_desc = [&](int k_step) {
    return q_desc0 + (((k_step / kStepsPerSlab) * kBlockM * kQkRow +
                       (k_step % kStepsPerSlab) * 32) >> 4);
  };
  auto k_desc = [&](int stage, int k_step) {
    return k_desc0 + ((stage * kTileBytes + (k_step / kStepsPerSlab) * kBlockN * kQkRow +
                       (k_step % kStepsPerSlab) * 32) >> 4);
  };
  auto vt_desc = [&](int stage, int key_step) {
    return vt_desc0 + ((stage * kTileBytes + key_step * 32) >> 4);
  };

  float s[kBlockN / 2];
  float o[kHeadDim / 2];
  uint32_t pa[kBlockN / 32][4];
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) s[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) o[i] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};

  // At head_dim 128 Q is 16 registers a thread; at 256 (O alone is 128) it stays in shared
  // memory.
  constexpr bool kQInRegisters = kHeadDim <= 128;
  uint32_t qa[kQInRegisters ? kHeadDim / 32 : 1][4];
  auto load_q_fragments = [&]() {
    const int row = warp_row0 + group;
#pragma unroll
    for (int k = 0; k < (kQInRegisters ? kHeadDim / 32 : 0); ++k) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        qa[k][i] = *reinterpret_cast<const uint32_t*>(
            q_smem + SwizzledByte<kQkRow>(kBlockM, row + 8 * (i % 2), 2 * k + i / 2) +
            quad_lane * 4);
      }
    }
  };
  auto issue_qk = [&](int stage) {
#pragma unroll
    for (int k_step = 0; k_step < kHeadDim / 32; ++k_step) {
      if constexpr (kQInRegisters) {
        WgmmaFp8QkFromRegisters(s, qa[k_step], k_desc(stage, k_step), k_step > 0);
      } else {
        WgmmaFp8QkFromShared(s, q_desc(k_step), k_desc(stage, k_step), k_step > 0);
      }
    }
  };
  auto issue_pv = [&](int stage) {
#pragma unroll
    for (int key_step = 0; key_step < kBlockN / 32; ++key_step) {
      WgmmaFp8Pv<kHeadDim>(o, pa[key_step], vt_desc(stage, key_step));
    }
  };
  auto softmax = [&](int t, float(&correction)[2]) {
    sm90::SoftmaxTile<kBlockN, kCausal>(
        s, row_max, row_sum, correction,
        {.kv0 = t * kBlockN, .kv_len = kv_len, .qpos0 = qpos0,
         .warp_first_pos = warp_first_pos, .quad_lane = quad_lane},
        p.scale_log2);
  };
  // P as e4m3 A fragments. Key step k covers n8 chunks 4k..4k+3: register 0 holds row `group`'s
  // keys 2q, 2q+1 of chunk 4k and of chunk 4k+1, register 1 the same of row group + 8,
  // registers 2 and 3 those of chunks 4k+2 and 4k+3 (the order V^T was written in).
  auto pack_p = [&]() {
#pragma unroll
    for (int k = 0; k < kBlockN / 32; ++k) {
      const float* c = s + 16 * k;
      pa[k][0] = PackFp8x4(c[0], c[1], c[4], c[5]);
      pa[k][1] = PackFp8x4(c[2], c[3], c[6], c[7]);
      pa[k][2] = PackFp8x4(c[8], c[9], c[12], c[13]);
      pa[k][3] = PackFp8x4(c[10], c[11], c[14], c[15]);
    }
  };

  MbarrierWait(SharedAddress(&q_full), 0);
  FenceProxyAsync();  // Q came by cp.async (the generic proxy)
  load_q_fragments();
  sm90::RunKvTiles<kStages, true>(
      num_kv_tiles, o, s,
      sm90::KvTileSteps{wait_k, wait_vt, [&](int t) { release(k_empty, t); },
                        [&](int t) { release(vt_empty, t); }, take_turn, pass_turn, issue_qk,
                        issue_pv, softmax, pack_p});
  if (consumer == 0) take_turn();
  WgmmaWait<0>();
  PinRegisters(o);

  // O in bf16 through this consumer's 64 rows of O's buffer, or at head_dim 256 of the staging
  // buffers (every V tile has been transposed by now, so nothing reads or loads them any
  // more): 64 rows of head_dim bf16 in 64-element slabs, swizzled, then written out 16 bytes
  // a thread.
  constexpr int kOutChunks = kHeadDim / 8;  // 16-byte chunks of a bf16 row
  uint8_t* const o_buffer =
      kFp8OwnOutputFor<kHeadDim> ? vt_smem + kStages * kTileBytes : vs_smem;
  __nv_bfloat16* o_smem =
      reinterpret_cast<__nv_bfloat16*>(o_buffer + consumer * 64 * kHeadDim * 2);
  if constexpr (!kFp8OwnOutputFor<kHeadDim>) {
    // The transposers' last reads of the staging buffers came before this (vt_full says so);
    // the barrier says it too, in a form compute-sanitizer's racecheck follows.
    asm volatile("bar.sync %0, %1;\n" ::"n"(kHandOverBarrier), "n"(kHandOverThreads) : "memory");
  }
  auto out_offset = [](int row, int chunk) {  // elements, in slabs of 64 rows x 64
    return ((chunk >> 3) * 64 + row) * 64 + (((chunk & 7) ^ (row & 7)) << 3);
  };
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = row_sum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = p.v_scale / sum;
    const int local_row = warp * 16 + group + 8 * r;
#pragma unroll
    for (int c = 0; c < kHeadDim / 8; ++c) {
      *reinterpret_cast<uint32_t*>(o_smem + out_offset(local_row, c) + quad_lane * 2) =
          PackTwo<__nv_bfloat16>(o[4 * c + 2 * r] * inv, o[4 * c + 2 * r + 1] * inv);
    }
    const int row = q_tile_start + consumer * 64 + local_row;
    if (p.lse != nullptr && quad_lane == 0 && row < q_len) {
      p.lse[static_cast<int64_t>(q_start + row) * p.num_qo_heads + qo_head] =
          (row_max[r] + log2f(sum)) * device::kLn2;
    }
  }
  asm volatile("bar.sync %0, 128;\n" ::"r"(kOwnBarrier0 + consumer) : "memory");
  const int group_thread = threadIdx.x % 128;
#pragma unroll 4
  for (int i = group_thread; i < 64 * kOutChunks; i += 128) {
    const int local_row = i / kOutChunks, chunk = i % kOutChunks;
    const int row = q_tile_start + consumer * 64 + local_row;
    if (row >= q_len) break;  // rows only grow with i
    const uint4 value = *reinterpret_cast<const uint4*>(o_smem + out_offset(local_row, chunk));
    __nv_bfloat16* out =
        static_cast<__nv_bfloat16*>(p.o) +
        (static_cast<int64_t>(q_start + row) * p.num_qo_heads + qo_head) * kHeadDim;
    *reinterpret_cast<uint4*>(out + chunk * 8) = value;
  }
#else
  __trap();  // built for sm_90a only; LaunchPrefill checks the device first
#endif
}

// A tensor map over one fp8 KV cache, (head_dim bytes, KV head, slot), for boxes of
// 128 x 1 x kFp8BoxRows bytes with the 128-byte swizzle (64 x 1 x kFp8BoxRows, 64-byte swizzle,
// at head_dim 64).
absl::Status EncodeFp8KvTensorMap(const void* cache, const AttentionProblem& problem,
                                  CUtensorMap& map) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = EncodeTiledEntry();
  if (encode == nullptr) {
    return absl::FailedPreconditionError(
        "the fp8 prefill loads K and V by TMA, and the driver has no cuTensorMapEncodeTiled");
  }
  const AttentionShape& shape = problem.shape;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(shape.head_dim),
                              static_cast<cuuint64_t>(shape.num_kv_heads),
                              static_cast<cuuint64_t>(problem.buffers.num_pages) * shape.page_size};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(shape.head_dim),
                                 static_cast<cuuint64_t>(shape.num_kv_heads) * shape.head_dim};
  // Rows of 128 bytes at head_dim 128 and 256 (in slabs), of 64 at head_dim 64.
  const bool narrow = shape.head_dim < kRowBytes;
  const cuuint32_t box[3] = {narrow ? 64u : static_cast<cuuint32_t>(kRowBytes), 1, kFp8BoxRows};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult result =
      encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void*>(cache), dims, strides, box,
             element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             narrow ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    return absl::InternalError(absl::StrCat(
        "cuTensorMapEncodeTiled refused the fp8 KV cache (CUresult ", static_cast<int>(result),
        "): the fp8 prefill needs 16-byte aligned caches"));
  }
  return absl::OkStatus();
}

template <int kHeadDim, bool kCausal>
absl::Status LaunchFp8Kernel(const dim3& grid, const PrefillKernelParams& params,
                             const Fp8KvTensorMaps& maps, cudaStream_t stream) {
  constexpr int kShared = Fp8SharedBytes<kHeadDim>();
  auto* kernel = PrefillSm90Fp8Kernel<kHeadDim, kCausal>;
  CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
  kernel<<<grid, kFp8Threads, kShared, stream>>>(params, maps);
  CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

template <int kHeadDim>
absl::StatusOr<PrefillLaunchInfo> LaunchFp8Typed(const AttentionProblem& problem,
                                                 const PrefillKernelParams& params,
                                                 cudaStream_t stream) {
  const dim3 grid(params.num_qo_heads,
                  (problem.lengths.max_q_len() + kFp8BlockM - 1) / kFp8BlockM,
                  problem.lengths.batch());
  Fp8KvTensorMaps maps{};
  RETURN_IF_ERROR(EncodeFp8KvTensorMap(problem.buffers.k_cache, problem, maps.k));
  RETURN_IF_ERROR(EncodeFp8KvTensorMap(problem.buffers.v_cache, problem, maps.v));
  if (problem.shape.causal) {
    RETURN_IF_ERROR((LaunchFp8Kernel<kHeadDim, true>(grid, params, maps, stream)));
  } else {
    RETURN_IF_ERROR((LaunchFp8Kernel<kHeadDim, false>(grid, params, maps, stream)));
  }
  return PrefillLaunchInfo{.block_m = kFp8BlockM,
                           .block_n = kFp8BlockN,
                           .warps = 8,
                           .stages = kFp8Stages,
                           .shared_bytes = Fp8SharedBytes<kHeadDim>(),
                           .blocks = static_cast<int64_t>(grid.x) * grid.y * grid.z,
                           .variant = PrefillVariant::kHopperWgmma,
                           .tma_kv = true};
}

}  // namespace

absl::Status CheckFp8PrefillShape(const AttentionShape& shape) {
  if (shape.head_dim != 64 && shape.head_dim != 128 && shape.head_dim != 256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "head_dim: got ", shape.head_dim, "; the fp8 e4m3 prefill takes 64, 128 or 256"));
  }
  if (shape.page_size % kFp8BoxRows != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size: got ", shape.page_size,
                     "; the fp8 e4m3 prefill loads K and V in boxes of 16 rows a page, so takes "
                     "pages of 16 rows or a multiple of 16"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PrefillLaunchInfo> LaunchPrefillSm90Fp8(const AttentionProblem& problem,
                                                       const PrefillKernelParams& params,
                                                       cudaStream_t stream) {
  RETURN_IF_ERROR(CheckFp8PrefillShape(problem.shape));
  switch (problem.shape.head_dim) {
    case 64:
      return LaunchFp8Typed<64>(problem, params, stream);
    case 128:
      return LaunchFp8Typed<128>(problem, params, stream);
    default:
      return LaunchFp8Typed<256>(problem, params, stream);
  }
}

}  // namespace gpuprof::attention
