// FlashAttention-3-style prefill for Hopper (sm_90a) over the paged KV cache, on wgmma.
//
// One block per (query head, tile of query rows, sequence), its warpgroups specialised:
// warpgroup 0 (the producer, few registers) loads Q, then K and V tiles through the page table
// into two or three shared-memory stages, K and V each signalled on its own mbarrier: by TMA
// (one 16-row box of a page per lane) where pages hold a multiple of 16 rows, else by cp.async
// from all four warps. At head_dim 128 and 256 K and V of a stage are also freed apart (K once
// S is done, an iteration before V) and one TMA warp loads each. The other warpgroups (the
// consumers, most registers; two at head_dim 128 and 256, three at 64, so 128 or 192 query
// rows a block) own 64 query rows each and wait only on those mbarriers, never on a
// block-wide barrier. The consumers take turns to issue their matrix multiplies (ping-pong),
// so one's softmax runs under another's.
// S = Q K^T is a wgmma m64nNk16 per 16 of head_dim (Q from registers up to head_dim 128, else
// from shared memory); P stays in registers as the A operand of O += P V; within a consumer the
// next tile's S is issued before this tile's P V and its softmax runs while the tensor cores
// compute P V. Shared-memory tiles are laid out as wgmma's 128-byte swizzle expects (and TMA's
// 128-byte swizzle writes): rows of 64 elements (128 bytes), 16-byte chunk index XOR row % 8,
// head_dim in 64-wide slabs, every tile on a 1024-byte boundary.
// Five grids beside the plain one, all without a causal mask: at head_dim 128 with up to 16384
// keys, a persistent grid (one block an SM over the plain grid's blocks as units); at head_dim
// 64 with up to 16384 keys, a persistent grid that deals the units of its last two rounds out by
// KV tiles (stream-K, PrefillSm90StreamKKernel), a unit cut between two blocks merged through
// global memory; at head_dim 256, where K and V outgrow the L2, a head's query tiles go first
// (tiles_fastest), and pairs of query tiles run as clusters of two blocks that load each K/V
// tile once for both by TMA multicast (kMulticastKv); at head_dim 64 beyond 16384 keys, a last
// wave at most half full runs as a second launch in clusters of two blocks that split each
// tile's keys and merge through distributed shared memory (whole_tiles, kSplitKv).
//
// Measured (docs/benchmarks/RESULTS.md): what mattered was the producer's cost in issue slots
// (one page-table read per row, not per chunk: +20%; TMA instead of cp.async: +7-14%), K
// freed apart from V (+10% at head_dim 128, +25% at 256, with wider tiles there), three
// consumers at head_dim 64 (+7-8%), and keeping the softmax where the compiler would not move
// it; ping-pong and the warp specialisation alone changed little. Beside PyTorch's cuDNN kernel,
// same instruction count, persistent: its lead at full attention is what our blocks pay once
// (docs/gpu-runs/attention-prefill-vs-cudnn-h100-h200.md). A persistent grid of our own
// (PrefillSm90PersistentKernel: each unit restarts at stage 0, so that the wgmma descriptors stay
// in uniform registers; Q by TMA; the page entries read a tile ahead; a unit's first S = Q K^T
// issued with the previous unit's last P V) hides most of that at head_dim 128 full attention
// up to 16384 keys (docs/gpu-runs/attention-prefill-persistent-h200.md,
// attention-prefill-unit-overlap-h200.md). Against cuDNN's kernel, tile
// for tile, ours spends its consumer warps' time in the softmax where cuDNN's wait on the tensor
// cores (docs/gpu-runs/attention-prefill-stalls-h200.md).
#include <cuda.h>  // CUtensorMap and its enums (libcuda is not linked: common/cuda_driver_entry.h)
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/cuda_driver_entry.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/attention/attention_device.cuh"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/head_dims.h"
#include "kernels/attention/hopper_async.cuh"
#include "kernels/attention/prefill.h"
#include "kernels/attention/prefill_kernel_params.h"
#include "kernels/attention/prefill_sm90.h"
#include "kernels/attention/prefill_sm90_pipeline.cuh"
#include "kernels/attention/prefill_sm90_softmax.cuh"
#include "kernels/attention/prefill_tile.cuh"
#include "kernels/attention/stream_k_plan.h"

namespace gpuprof::attention {
namespace {

using device::CpAsync16;
using device::CpAsyncCommit;
using device::CpAsyncWait;
using device::PackTwo;
using device::PagedSlot;
using device::SharedAddress;
using sm90::ClusterCtaRank;
using sm90::ClusterSync;
using sm90::CpAsyncArriveOn;
using sm90::Descriptor;
using sm90::EncodeTiledEntry;
using sm90::FenceMbarrierInitCluster;
using sm90::FenceProxyAsync;
using sm90::LoadSharedCluster;
using sm90::MapShared;
using sm90::MbarrierArrive;
using sm90::MbarrierArriveCluster;
using sm90::MbarrierArriveIf;
using sm90::MbarrierArriveExpectBytes;
using sm90::MbarrierArriveRemote;
using sm90::MbarrierInit;
using sm90::MbarrierWait;
using sm90::PinRegisters;
using sm90::PrefetchTensorMap;
using sm90::TmaLoad3d;
using sm90::TmaLoad3dMulticast;
using sm90::TmaStore3d;
using sm90::TmaStoreCommit;
using sm90::TmaStoreWaitRead;
using sm90::WgmmaCommit;
using sm90::WgmmaFence;
using sm90::WgmmaWait;

// Warpgroup 0 loads (the producer), warpgroups 1 to kConsumerGroupsFor compute (the
// consumers), 64 query rows each. Head_dim 64 has three consumers: a tile's exponentials there
// take as long as its matrix multiplies, and with two consumers taking turns one's softmax
// could hide only under the other's multiplies (H200, 4k: causal 196 -> 181 us, full 345 ->
// 323 us, although 192-row tiles fill fewer waves).
template <int kHeadDim>
inline constexpr int kConsumerGroupsFor = kHeadDim == 64 ? 3 : 2;
inline constexpr int kProducerThreads = 128;
constexpr int ThreadsWith(int consumer_groups) { return kProducerThreads + consumer_groups * 128; }
// Registers a thread after the split (setmaxnreg): 128 x 40 + 256 x 232 <= 65536 with two
// consumers, 128 x 32 + 384 x 160 = 65536 with three.
constexpr int ProducerRegistersWith(int consumer_groups) { return consumer_groups == 3 ? 32 : 40; }
constexpr int ConsumerRegistersWith(int consumer_groups) {
  return consumer_groups == 3 ? 160 : 232;
}
template <int kHeadDim>
inline constexpr int kConsumerThreadsFor = kConsumerGroupsFor<kHeadDim> * 128;
template <int kHeadDim>
inline constexpr int kThreadsFor = ThreadsWith(kConsumerGroupsFor<kHeadDim>);
template <int kHeadDim>
inline constexpr int kBlockMFor = kConsumerGroupsFor<kHeadDim> * 64;
template <int kHeadDim>
inline constexpr int kProducerRegistersFor = ProducerRegistersWith(kConsumerGroupsFor<kHeadDim>);
template <int kHeadDim>
inline constexpr int kConsumerRegistersFor = ConsumerRegistersWith(kConsumerGroupsFor<kHeadDim>);
inline constexpr int kSlab = 64;            // elements in one 128-byte swizzled row
inline constexpr int kSwizzleAlign = 1024;  // the swizzle pattern repeats every 8 rows

// KV rows per tile, tiles in flight, and whether K and V of a stage are released apart.
//
// Released apart (head_dim 128 and 256), K of a stage is free once both consumers' S = Q K^T of
// it is done, an iteration before its V (free once P V is): the next tiles' K loads start that
// much earlier, which is what lets two stages keep the consumers fed. On the H200 at 4k tokens
// (docs/gpu-runs/attention-prefill-k-apart-h100-h200.md): head_dim 128 full 477 -> 431 us
// (three stages released together -> two released apart), head_dim 256 full 511 -> 397 us
// (48 keys in three stages -> 80 in two: the wider S wgmma reads less shared memory a flop,
// 64 + 2 x 2 x 40 KB fills the 227 KB a block may have). At head_dim 64 the split cost 1-3%
// (a tile there is short, and the extra arrivals and the second producer warp are not), so
// it keeps one release of the whole stage, in four stages: a power of two, so that a tile's
// stage and the parity its barriers are waited on with are a mask and a shift of the tile's
// index, where three stages took a multiply-high and a multiply each (H200, same call: full
// 1.5k/4k/8k +0.6/+1.0/+0.8%, causal 4k +1.0%, 2k level; docs/gpu-runs/attention-prefill-d64-
// units-h200.md). 176-key tiles at head_dim 128 ran 3-5% slower.
// O is head_dim / 2 registers a consumer thread, S kBlockN / 2 and P kBlockN / 4 beside it.
template <int kHeadDim>
inline constexpr int kBlockNFor = kHeadDim == 256 ? 80 : 128;
template <int kHeadDim>
inline constexpr int kStagesFor = kHeadDim == 64 ? 4 : 2;
template <int kHeadDim>
inline constexpr bool kReleaseKApartFor = kHeadDim != 64;
// The KV tiles a sequence of kv_len keys takes (the last one maybe partial).
template <int kHeadDim>
constexpr int KvTilesFor(int64_t kv_len) {
  return static_cast<int>((kv_len + kBlockNFor<kHeadDim> - 1) / kBlockNFor<kHeadDim>);
}

template <int kHeadDim>
constexpr int SharedBytes() {
  constexpr int kRows = kBlockMFor<kHeadDim> + 2 * kStagesFor<kHeadDim> * kBlockNFor<kHeadDim>;
  return kRows * kHeadDim * 2 + kSwizzleAlign;
}
// The dynamic shared memory a Hopper block may opt into (227 KB); head_dim 256 uses 225 KB.
inline constexpr int kMaxSharedBytes = 227 * 1024;
static_assert(SharedBytes<64>() <= kMaxSharedBytes && SharedBytes<128>() <= kMaxSharedBytes &&
              SharedBytes<256>() <= kMaxSharedBytes);

// Where a short last wave is split (PrefillKernelParams::whole_tiles): head_dim 64, whose
// 192-row blocks fill 2.67 waves of 132 SMs at 2k tokens and 5.33 at 4k. A split block also
// keeps a slot a consumer thread for the partial O it hands over (or takes): O, two row maxima,
// two row sums, in fp32.
template <int kHeadDim>
inline constexpr bool kSplitsShortLastWave = kHeadDim == 64;
template <int kHeadDim>
inline constexpr int kMergeSlotFloats = kHeadDim / 2 + 4;
template <int kHeadDim>
constexpr int SplitSharedBytes() {
  return SharedBytes<kHeadDim>() + kConsumerThreadsFor<kHeadDim> * kMergeSlotFloats<kHeadDim> * 4;
}
static_assert(SplitSharedBytes<64>() <= kMaxSharedBytes);

// Whether the grid may take a head's query tiles first (PrefillKernelParams::tiles_fastest):
// head_dim 256 only, where K and V outgrow the L2 soonest. Measured on an H100 with the L2
// flushed: 4k full +2.2%, 16k full 5-10%; head_dim 128 at 8k +0.6%, at 16k within the noise,
// and the run-time choice cost its 4k full 1% where the order stayed (docs/benchmarks/RESULTS.md).
template <int kHeadDim>
inline constexpr bool kTilesFirstChosen = kHeadDim == 256;

// Where two blocks of a cluster share their K/V loads (kMulticastKv): head_dim 256 without a
// causal mask. Two neighbouring query tiles of one head read the same keys: each block loads
// half of every tile's boxes, written to both blocks' shared memory by TMA multicast, which
// halves what the L2 sends. On the H200 at 4k full: head_dim 256 +2.4%; head_dim 128 -1% (its
// L2 was 43% busy, and the pair waiting for each other's releases costs 2.7% by itself).
template <int kHeadDim>
inline constexpr bool kMulticastsKv = kHeadDim == 256;

// Where a persistent grid runs, without a causal mask and on a uniform batch. It hides most of
// what a block of the plain grid pays once (on the H200 about 5 us a block, under 3 a unit:
// launch, Q and the first K/V tiles, O written out).
// Whole units (PrefillSm90PersistentKernel): two consumers over 128-row units at every head_dim,
// two stages released apart, KV tiles a multiple of the stages, up to kWholeUnitMaxKvTilesFor.
// Head_dim 128: H200, q = kv, same call: 1k +3.0%, 2k +2.7%, 4k +1.4%, 8k +0.3-0.5% over the
// plain grid, its KV tiles up to 3% longer; then the next unit's first S issued with the last
// tile's P V, the tile loop without a branch: 4k and 8k a further +1.5%; at 16k, where a
// launch's time moves by up to 10% from round to round, 3% ahead of the plain grid in every
// round of one run and level in another, so it runs there too
// (docs/gpu-runs/attention-prefill-persistent-h200.md, attention-prefill-stalls-h200.md,
// attention-prefill-unit-overlap-h200.md). Head_dim 64 up to 1024 keys: with two consumers a
// launch ran 20-27% longer than the stream-K and plain grids' three at 4k-16k (H200 full: 0.85x
// of cuDNN against 1.02-1.07x; 2k: 10%), but at 1k, where a unit is eight tiles and what it
// pays once counts most, the whole units overlapped at their boundaries ran 30.5 us against
// 35.8 (docs/gpu-runs/attention-prefill-d64-units-h200.md).
// Head_dim 64 from there (PrefillSm90StreamKKernel): up to kStreamKMaxKvTiles, where its 192-row
// units leave a short last round (2.67 rounds at 2k tokens, 5.33 at 4k); with a workspace, where at
// least kStreamKMinIdleTiles tiles' time of the SMs would idle, the last two rounds' units are
// dealt out by KV tiles (stream-K). H200, same call (docs/gpu-runs/attention-prefill-stream-k-
// h200.md): 2k +0.8%, 4k +2.2% over the plain grid with its split last wave; 8k 2% slower. With
// each piece's first S issued under the previous piece's last P V, 6k +5.0%, 8k +3.7%, 12k
// +5.5%, 16k +0.8% (within its noise) over the plain grid
// (attention-prefill-stream-k-overlap-h200.md), hence the limit of 16384 keys, untried beyond.
// The same kernel at head_dim 128 ran 1.7-2.7% slower a tile than PrefillSm90PersistentKernel,
// its main loop the same to 7 instructions (8k: +0.5% with stream-K; 2k: 2.5% slower), so
// head_dim 128 keeps whole units.
// Each keeps a second Q buffer beside the stages.
template <int kHeadDim>
inline constexpr bool kPersistentFor = kHeadDim == 128 || kHeadDim == 64;
inline constexpr int kWholeUnitGroups = 2;
inline constexpr int kWholeUnitBlockM = kWholeUnitGroups * 64;
inline constexpr int kWholeUnitStages = 2;
template <int kHeadDim>
inline constexpr int kWholeUnitMaxKvTilesFor = kHeadDim == 64 ? 8 : 128;
template <int kHeadDim>
constexpr int WholeUnitSharedBytes() {
  return (2 * kWholeUnitBlockM + 2 * kWholeUnitStages * kBlockNFor<kHeadDim>) * kHeadDim * 2 +
         kSwizzleAlign;
}
static_assert(WholeUnitSharedBytes<64>() <= kMaxSharedBytes &&
              WholeUnitSharedBytes<128>() <= kMaxSharedBytes);
template <int kHeadDim>
inline constexpr bool kStreamKFor = kHeadDim == 64;
inline constexpr int kStreamKMaxKvTiles = 128;
// Stream-K pays where the last round of whole units would leave at least this many KV tiles'
// time of the SMs idle (idle blocks x tiles a unit / SMs): it costs each block about one more
// piece of work. H200, in the stream-K kernel: head_dim 128 at 2k, 1.9 tiles idle, 2% slower
// with it; 4k, 7.8 tiles, 1.6% faster; head_dim 64 at 2k, 5.3 tiles, 5.0% faster.
inline constexpr int kStreamKMinIdleTiles = 4;
template <int kHeadDim>
constexpr int StreamKSharedBytes() {
  return SharedBytes<kHeadDim>() + kBlockMFor<kHeadDim> * kHeadDim * 2;
}
static_assert(StreamKSharedBytes<64>() <= kMaxSharedBytes);
// The most blocks (SMs) the stream-K workspace has slots for: H100 and H200 have 132.
inline constexpr int kMaxPersistentBlocks = 160;

// Element offset of 16-byte chunk `chunk` of row `row` in a tile of `rows` rows.
__device__ __forceinline__ int SlabOffset(int rows, int row, int chunk) {
  const int slab = chunk >> 3, c = chunk & 7;
  return (slab * rows + row) * kSlab + ((c ^ (row & 7)) << 3);
}

// The last tile's V rows from first_unused on were not loaded by TMA, or lie past kv_len:
// whatever is there (another tile's rows, or bytes never written) would reach O through P = 0
// times it, and 0 x NaN is NaN. Every consumer writes the same zeros and waits (own_barrier, its
// four warps) for its own.
template <int kBlockN, int kHeadDim, typename T>
__device__ __forceinline__ void ZeroVRowsFrom(T* tile, int first_unused, int own_barrier) {
  constexpr int kChunks = kHeadDim / 8;
  for (int i = threadIdx.x % 128; i < (kBlockN - first_unused) * kChunks; i += 128) {
    const int row = first_unused + i / kChunks, chunk = i % kChunks;
    *reinterpret_cast<uint4*>(tile + SlabOffset(kBlockN, row, chunk)) = uint4{0, 0, 0, 0};
  }
  FenceProxyAsync();
  asm volatile("bar.sync %0, 128;\n" ::"r"(own_barrier) : "memory");
}

// Merges another block's partial result for the same rows over other keys into this thread's:
// both weighed by 2^(their row max - the larger). `theirs` is (row max 0, row max 1, row sum 0,
// row sum 1) as this thread's partner held them; load(i) returns their O elements i .. i + 3.
template <int kHeadDim, class LoadO>
__device__ __forceinline__ void MergePartial(float (&o)[kHeadDim / 2], float (&row_max)[2],
                                             float (&row_sum)[2], const float4 theirs_stats,
                                             LoadO load) {
  const float their_max[2] = {theirs_stats.x, theirs_stats.y};
  const float their_sum[2] = {theirs_stats.z, theirs_stats.w};
  float mine[2], theirs[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float merged = fmaxf(row_max[r], their_max[r]);
    mine[r] = device::FastExp2(row_max[r] - merged);
    theirs[r] = device::FastExp2(their_max[r] - merged);
    row_max[r] = merged;
    row_sum[r] = row_sum[r] * mine[r] + their_sum[r] * theirs[r];
  }
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; i += 4) {
    const float4 v = load(i);
    // o[4c + 2r + e]: elements i, i + 1 are row 0's, i + 2, i + 3 row 1's.
    o[i] = o[i] * mine[0] + v.x * theirs[0];
    o[i + 1] = o[i + 1] * mine[0] + v.y * theirs[0];
    o[i + 2] = o[i + 2] * mine[1] + v.z * theirs[1];
    o[i + 3] = o[i + 3] * mine[1] + v.w * theirs[1];
  }
}

// P as wgmma A fragments: key step k covers the accumulators of n8 chunks 2k and 2k + 1.
template <typename T, int kBlockN>
__device__ __forceinline__ void PackP(const float (&s)[kBlockN / 2],
                                      uint32_t (&pa)[kBlockN / 16][4]) {
#pragma unroll
  for (int k = 0; k < kBlockN / 16; ++k) {
    pa[k][0] = PackTwo<T>(s[8 * k + 0], s[8 * k + 1]);
    pa[k][1] = PackTwo<T>(s[8 * k + 2], s[8 * k + 3]);
    pa[k][2] = PackTwo<T>(s[8 * k + 4], s[8 * k + 5]);
    pa[k][3] = PackTwo<T>(s[8 * k + 6], s[8 * k + 7]);
  }
}

// Where a consumer's 64 rows of O go: its rows of the query tile, and the tile's place in O (the
// kernel's parameters are copied in rather than referred to, which would keep them in memory).
struct OutputRows {
  int consumer;
  int warp_row0;  // block row of the warp's 16 rows
  int group, quad_lane;
  int q_tile_start, q_len, q_start, qo_head;
  void* o;
  float* lse;
  int num_qo_heads;
};

// Normalises this thread's two rows of O into the Q tile (free once the consumer's last
// S = Q K^T is done; same swizzle, so the 4-byte writes of a warp hit distinct banks) and writes
// their LSE. A warp's 16 rows of the tile are then its own.
// kByMatrix: the warp's rows go in as 8 x 8 matrices, four an instruction (stmatrix: lane l
// names row l % 8 of matrix l / 8), instead of a 4-byte store a thread for each 8 columns of
// each row (the persistent grids: 104-120 instructions fewer a kernel; H200, same call, level
// to +1%: head_dim 128 full 4k/8k +0.2/+0.4%, head_dim 64 1k +1.0%).
template <typename T, int kHeadDim, int kBlockM, bool kByMatrix = false>
__device__ __forceinline__ void StageOutputRows(const float (&o)[kHeadDim / 2],
                                                const float (&row_max)[2],
                                                const float (&row_sum)[2], T* q_smem,
                                                const OutputRows& at) {
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = row_sum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    inv[r] = 1.0f / sum;
    const int block_row = at.warp_row0 + at.group + 8 * r;
    if constexpr (!kByMatrix) {
#pragma unroll
      for (int c = 0; c < kHeadDim / 8; ++c) {
        *reinterpret_cast<uint32_t*>(q_smem + SlabOffset(kBlockM, block_row, c) +
                                     at.quad_lane * 2) =
            PackTwo<T>(o[4 * c + 2 * r] * inv[r], o[4 * c + 2 * r + 1] * inv[r]);
      }
    }
    const int row = at.q_tile_start + block_row;
    if (at.lse != nullptr && at.quad_lane == 0 && row < at.q_len) {
      at.lse[static_cast<int64_t>(at.q_start + row) * at.num_qo_heads + at.qo_head] =
          (row_max[r] + log2f(sum)) * device::kLn2;
    }
  }
  if constexpr (kByMatrix) {
    // Matrices (chunk c, rows 0-7), (c, rows 8-15), (c + 1, rows 0-7), (c + 1, rows 8-15) of the
    // warp's 16 rows: a thread's two values of each are its accumulators' (group, 2 quad_lane).
    const int lane = threadIdx.x % 32;
    const int row = at.warp_row0 + ((lane >> 3) & 1) * 8 + (lane & 7);
#pragma unroll
    for (int c = 0; c < kHeadDim / 8; c += 2) {
      const uint32_t address = SharedAddress(q_smem + SlabOffset(kBlockM, row, c + (lane >> 4)));
      asm volatile(
          "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(address),
          "r"(PackTwo<T>(o[4 * c] * inv[0], o[4 * c + 1] * inv[0])),
          "r"(PackTwo<T>(o[4 * c + 2] * inv[1], o[4 * c + 3] * inv[1])),
          "r"(PackTwo<T>(o[4 * c + 4] * inv[0], o[4 * c + 5] * inv[0])),
          "r"(PackTwo<T>(o[4 * c + 6] * inv[1], o[4 * c + 7] * inv[1]))
          : "memory");
    }
  }
}

// One 16-byte chunk of a staged row (the tile's row block_row, the sequence's row `row`) out to O.
template <typename T, int kHeadDim, int kBlockM>
__device__ __forceinline__ void CopyStagedChunk(const T* q_smem, const OutputRows& at,
                                                int block_row, int row, int chunk) {
  const uint4 value =
      *reinterpret_cast<const uint4*>(q_smem + SlabOffset(kBlockM, block_row, chunk));
  T* out = static_cast<T*>(at.o) +
           (static_cast<int64_t>(at.q_start + row) * at.num_qo_heads + at.qo_head) * kHeadDim;
  *reinterpret_cast<uint4*>(out + chunk * 8) = value;
}

// Stages this consumer's 64 rows of O (StageOutputRows), then writes them out whole, 16 bytes a
// thread, instead of 4-byte pieces of eight rows at a time. own_barrier: the named barrier of the
// consumer's four warps.
template <typename T, int kHeadDim, int kBlockM>
__device__ __forceinline__ void WriteOutputRows(const float (&o)[kHeadDim / 2],
                                                const float (&row_max)[2],
                                                const float (&row_sum)[2], T* q_smem,
                                                const OutputRows& at, int own_barrier) {
  constexpr int kChunks = kHeadDim / 8;
  StageOutputRows<T, kHeadDim, kBlockM>(o, row_max, row_sum, q_smem, at);
  asm volatile("bar.sync %0, 128;\n" ::"r"(own_barrier) : "memory");
  // Rows past q_len are skipped, not broken out of: a loop that threads of a warp leave at
  // different trips keeps ptxas from proving the warps converged after it, and the persistent
  // kernel's next unit then computed its wgmma descriptors outside the uniform registers (7%).
  const int group_thread = threadIdx.x % 128;
#pragma unroll 4
  for (int i = group_thread; i < 64 * kChunks; i += 128) {
    const int local_row = i / kChunks, chunk = i % kChunks;
    const int row = at.q_tile_start + at.consumer * 64 + local_row;
    if (row < at.q_len) {
      CopyStagedChunk<T, kHeadDim, kBlockM>(q_smem, at, at.consumer * 64 + local_row, row, chunk);
    }
  }
}

// The persistent grids' write-out: each warp's 16 rows, once staged, leave by TMA (o_map: O as
// (head_dim, query head, token) in boxes of 64 x 1 x 16), issued by its lane 0, where all 16 are
// rows of the sequence or the sequence is the batch's last (TMA drops rows past the tensor's
// end); else the warp copies its rows short of q_len out itself, 16 bytes a lane. No barrier of the
// consumer's warps (each writes out only what it staged), no loop of copies in the issue slots
// of the warps. Lane 0 returns once the stores have read the buffer (kWaitsForReads; else once
// they are issued, and the caller waits with TmaStoreWaitRead before the buffer is written
// again). H200, same call: head_dim 64 full 1k +3.3%, 4k +0.7%, head_dim 128 full 2k +0.4%, 2k
// at 64 and 4k-8k at 128 level (docs/gpu-runs/attention-prefill-stream-k-overlap-h200.md).
template <typename T, int kHeadDim, int kBlockM, bool kWaitsForReads = true>
__device__ __forceinline__ void SendStagedRows(const T* q_smem, const OutputRows& at,
                                               const CUtensorMap& o_map, bool last_sequence) {
  constexpr int kChunks = kHeadDim / 8;
  FenceProxyAsync();  // the staged rows (generic proxy) before the TMA unit (async proxy) reads
  __syncwarp();
  const int lane = threadIdx.x % 32;
  const int first_row = at.q_tile_start + at.warp_row0;
  if (__all_sync(0xffffffffu, last_sequence || first_row + 16 <= at.q_len)) {
    if (lane == 0 && first_row < at.q_len) {
#pragma unroll
      for (int slab = 0; slab < kHeadDim / kSlab; ++slab) {
        TmaStore3d(o_map, SharedAddress(q_smem + (slab * kBlockM + at.warp_row0) * kSlab),
                   slab * kSlab, at.qo_head, at.q_start + first_row);
      }
      TmaStoreCommit();
      if constexpr (kWaitsForReads) TmaStoreWaitRead<0>();
    }
  } else {
#pragma unroll
    for (int i = lane; i < 16 * kChunks; i += 32) {
      const int local_row = i / kChunks, chunk = i % kChunks;
      const int row = first_row + local_row;
      if (row < at.q_len) {
        CopyStagedChunk<T, kHeadDim, kBlockM>(q_smem, at, at.warp_row0 + local_row, row, chunk);
      }
    }
  }
}
template <typename T, int kHeadDim, int kBlockM>
__device__ __forceinline__ void WriteOutputRowsByTma(const float (&o)[kHeadDim / 2],
                                                     const float (&row_max)[2],
                                                     const float (&row_sum)[2], T* q_smem,
                                                     const OutputRows& at,
                                                     const CUtensorMap& o_map,
                                                     bool last_sequence) {
  StageOutputRows<T, kHeadDim, kBlockM, true>(o, row_max, row_sum, q_smem, at);
  SendStagedRows<T, kHeadDim, kBlockM>(q_smem, at, o_map, last_sequence);
}

// D (m64nN, fp32) [+]= A (64x16 from shared memory) * B (16xN from shared memory, K-major): S =
// Q K^T with Q in shared memory (128-key tiles at head_dim 64 and 128, 80-key tiles at 256).
template <typename T, int N>
__device__ __forceinline__ void WgmmaFromShared(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,
                                                int scale_d) {
  static_assert(N == 80 || N == 128, "the tile widths with Q in shared memory");
  if constexpr (N == 80 && std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 " GPUPROF_WGMMA_ACC40_REGS
        ", %40, %41, p, 1, 1, 0, 0;\n}\n"
        : GPUPROF_WGMMA_ACC40_OPERANDS
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (N == 80) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n80k16.f32.f16.f16 " GPUPROF_WGMMA_ACC40_REGS
        ", %40, %41, p, 1, 1, 0, 0;\n}\n"
        : GPUPROF_WGMMA_ACC40_OPERANDS
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " GPUPROF_WGMMA_ACC64_REGS
        ", %64, %65, p, 1, 1, 0, 0;\n}\n"
        : GPUPROF_WGMMA_ACC64_OPERANDS
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " GPUPROF_WGMMA_ACC64_REGS
        ", %64, %65, p, 1, 1, 0, 0;\n}\n"
        : GPUPROF_WGMMA_ACC64_OPERANDS
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  }
}

// D (m64nN, fp32) += A (64x16 in registers) * B (16xN from shared memory, N-major).
template <typename T, int N>
__device__ __forceinline__ void WgmmaFromRegisters(float (&d)[N / 2], const uint32_t (&a)[4],
                                                   uint64_t desc_b) {
  static_assert(N == 64 || N == 128 || N == 256);
  if constexpr (N == 256 && std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " GPUPROF_WGMMA_ACC128_REGS
        ", {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
        : GPUPROF_WGMMA_ACC128_OPERANDS
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
  } else if constexpr (N == 256) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " GPUPROF_WGMMA_ACC128_REGS
        ", {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
        : GPUPROF_WGMMA_ACC128_OPERANDS
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
  } else if constexpr (N == 64 && std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " GPUPROF_WGMMA_ACC32_REGS
        ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        : GPUPROF_WGMMA_ACC32_OPERANDS
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
  } else if constexpr (N == 64) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " GPUPROF_WGMMA_ACC32_REGS
        ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        : GPUPROF_WGMMA_ACC32_OPERANDS
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " GPUPROF_WGMMA_ACC64_REGS
        ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : GPUPROF_WGMMA_ACC64_OPERANDS
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " GPUPROF_WGMMA_ACC64_REGS
        ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : GPUPROF_WGMMA_ACC64_OPERANDS
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
  }
}

// The wgmma descriptors of a block's K and V stages (tiles of kBlockN rows in 64-wide swizzled
// slabs): K is K-major (head_dim contiguous), V is N-major (its rows are keys, the k of P V). A
// k16 step inside a slab moves the start by 32 bytes. Each is a base descriptor plus a start
// offset in 16-byte units (constant once the loops unroll), so issuing a wgmma needs no
// descriptor arithmetic; the starts stay below 256 KB, inside the 14-bit field.
template <typename T, int kBlockN, int kHeadDim>
struct KvStageDescriptors {
  static constexpr uint32_t kRowBytes = kSlab * 2;
  static constexpr uint32_t kTileBytes = kBlockN * kHeadDim * sizeof(T);
  uint64_t k0, v0;
  __device__ __forceinline__ KvStageDescriptors(const T* k_smem, const T* v_smem)
      : k0(Descriptor(SharedAddress(k_smem), kRowBytes, 8 * kRowBytes)),
        v0(Descriptor(SharedAddress(v_smem), kBlockN * kRowBytes, 8 * kRowBytes)) {}
  __device__ __forceinline__ uint64_t K(int stage, int k_step) const {
    return k0 +
           ((stage * kTileBytes + (k_step / 4) * kBlockN * kRowBytes + (k_step % 4) * 32) >> 4);
  }
  __device__ __forceinline__ uint64_t V(int stage, int key_step) const {
    return v0 + ((stage * kTileBytes + key_step * 16 * kRowBytes) >> 4);
  }
};

// The wgmma descriptors of a consumer's 64 rows of the Q tile (kBlockM rows in 64-wide swizzled
// slabs, K-major), the A operand of S = Q K^T: a base plus a constant offset a 16-wide step. The
// consumer's index comes in through a warp reduction, whose result lands in a uniform register,
// so the base is uniform and each step's descriptor a uniform add; from threadIdx it took a
// register-to-uniform move before every wgmma (H200: head_dim 64 full 4k +0.8%, 256 +0.6%).
template <int kBlockM>
struct QDescriptors {
  static constexpr uint32_t kRowBytes = kSlab * 2;
  uint64_t q0;
  __device__ __forceinline__ QDescriptors(const void* q_smem, int consumer)
      : q0(Descriptor(SharedAddress(q_smem) +
                          __reduce_max_sync(0xffffffffu, consumer) * 64 * kRowBytes,
                      kRowBytes, 8 * kRowBytes)) {}
  __device__ __forceinline__ uint64_t Step(int k_step) const {
    return q0 + (((k_step / 4) * kBlockM * kRowBytes + (k_step % 4) * 32) >> 4);
  }
};

// K/V rows a TMA box holds: a page size that is a multiple of 16 keeps a box inside one page.
inline constexpr int kBoxRows = 16;

// The K and V caches as TMA tensor maps: (head_dim, KV head, slot), boxes of 64 x 1 x kBoxRows
// written with the 128-byte swizzle the wgmma descriptors expect.
struct KvTensorMaps {
  CUtensorMap k;
  CUtensorMap v;
};
// The persistent grids' Q and O as TMA tensor maps: (head_dim, query head, token), Q in boxes of
// 64 x 1 x a unit's rows (its loads), O in boxes of 64 x 1 x 16 rows (a consumer warp's stores).
struct QoTensorMaps {
  CUtensorMap q, o;
};

// kTmaKv: K/V tiles arrive by TMA, one box per 16 rows of a page and 64-wide slab, issued by
// one producer warp (pages of a multiple of 16 rows); otherwise by cp.async from all four
// producer warps, row by row (any page size). TMA leaves the producer's 32 copies a thread and
// their address arithmetic out of the issue slots the consumers need.
// kSplitKv: a block of the split launch (see PrefillKernelParams::whole_tiles), in a cluster of
// two; rank 1 hands its partial O, row maxima and sums to rank 0, which merges and writes O.
// kMulticastKv (with kTmaKv, no causal mask): clusters of two blocks along the query tiles, which
// load K and V for each other (kMulticastsKv); a stage is free once the consumers of both have
// released it.
template <typename T, int kHeadDim, bool kCausal, bool kTmaKv, bool kSplitKv = false,
          bool kMulticastKv = false>
__global__ void __launch_bounds__(kThreadsFor<kHeadDim>, 1)
    PrefillSm90Kernel(const __grid_constant__ PrefillKernelParams p,
                      const __grid_constant__ KvTensorMaps maps) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(device::kIsAttentionType<T>, "T must be bf16 or fp16");
  static_assert(IsAttentionHeadDim(kHeadDim), "a head size of kAttentionHeadDims");
  constexpr int kBlockM = kBlockMFor<kHeadDim>;
  constexpr int kConsumerGroups = kConsumerGroupsFor<kHeadDim>;
  constexpr int kConsumerWarps = kConsumerGroups * 4;
  // Named barriers: 0 is __syncthreads, 1 .. kConsumerGroups the turns, then one a consumer.
  constexpr int kOwnBarrier0 = 1 + kConsumerGroups;
  constexpr int kBlockN = kBlockNFor<kHeadDim>;
  constexpr int kStages = kStagesFor<kHeadDim>;
  constexpr bool kReleaseKApart = kReleaseKApartFor<kHeadDim>;
  constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  constexpr int kTileElements = kBlockN * kHeadDim;
  static_assert(kBlockN % 16 == 0 && (kBlockM * kChunks) % kProducerThreads == 0);

  extern __shared__ uint8_t shared_raw[];
  // K and V of a stage fill on their own barriers: S = Q K^T of a tile starts before its V has
  // landed, and the first tile waits for Q and K only.
  // With kReleaseKApart, k_empty[s] completes once the consumers' S of stage s is done and
  // v_empty[s] once their P V is; without, v_empty[s] frees the whole stage.
  __shared__ uint64_t q_full, k_full[kStages], v_full[kStages], k_empty[kStages], v_empty[kStages];
  // Split blocks: rank 1's partial is in its slots (merge_full, on rank 0), rank 0 has read
  // them (merge_done, on rank 1).
  __shared__ uint64_t merge_full, merge_done;
  const uint32_t raw_address = SharedAddress(shared_raw);
  T* q_smem = reinterpret_cast<T*>(
      shared_raw + (((raw_address + kSwizzleAlign - 1) & ~(kSwizzleAlign - 1)) - raw_address));
  T* k_smem = q_smem + kBlockM * kHeadDim;       // [stages][slabs][kBlockN][64]
  T* v_smem = k_smem + kStages * kTileElements;  // [stages][slabs][kBlockN][64]

  if constexpr (kSplitsShortLastWave<kHeadDim> && !kCausal && !kSplitKv) {
    // The split launch runs the tiles from whole_tiles on.
    if (p.whole_tiles > 0 &&
        blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z) >= p.whole_tiles) {
      return;
    }
  }
  if constexpr (kTmaKv) {
    // Fetched now, the tensor maps are on chip by the time the first K and V loads name them.
    if (threadIdx.x == 0) {
      PrefetchTensorMap(maps.k);
      PrefetchTensorMap(maps.v);
    }
  }
  int kv_base = 0;  // the first key this block reads (a split block's second half: not 0)
  device::PrefillTile located;
  if constexpr (kSplitKv) {
    located = device::LocateSplitPrefillTile<kBlockM, kBlockN>(p, ClusterCtaRank(), kv_base);
  } else {
    located = device::LocatePrefillTile<kBlockM, kBlockN, kCausal, kTilesFirstChosen<kHeadDim>>(p);
  }
  const auto [qo_head, seq, q_start, q_len, q_tile_start, kv_len, shift, kv_end, num_kv_tiles] =
      located;
  // A split block goes on past an empty tile: its partner waits for it (the host splits only
  // uniform batches, whose tiles all hold rows). So does a multicast block whose partner's tile
  // (the one before it) holds rows: it loads its half of their K and V, and writes nothing.
  static_assert(!kMulticastKv || (kTmaKv && !kCausal && !kSplitKv));
  const uint32_t cluster_rank = kMulticastKv ? ClusterCtaRank() : 0;
  // Read beside the tile's lengths rather than after them: the sequence's first page entry.
  const int32_t* const pages = p.page_indices + p.page_indptr[seq];
  if (!kSplitKv && q_tile_start - static_cast<int>(cluster_rank) * kBlockM >= q_len) return;
  // The TMA lanes' (see the producer) page entries for tile 0, read before the barriers are set
  // up and Q is copied: a block's first K/V load waits on three reads in a row otherwise.
  constexpr int kTmaLanes = kReleaseKApart ? 64 : 32;
  constexpr int kBoxes = kBlockN / kBoxRows;
  auto read_box_page = [&](int t, int lane) {
    const int j = t * kBlockN + lane * kBoxRows;
    return lane < kBoxes && j < kv_end
               ? __ldg(pages + ((j + kv_base) >> p.log2_page_size))
               : 0;
  };
  int first_page = 0;
  if (kTmaKv && threadIdx.x < kTmaLanes) first_page = read_box_page(0, threadIdx.x % 32);
  // num_kv_tiles >= 1: validation refuses a causal q_len above kv_len, and kv_len 0 with
  // q_len > 0.

  if (threadIdx.x == 0) {
    MbarrierInit(SharedAddress(&q_full), kProducerThreads);
#pragma unroll
    for (int stage = 0; stage < kStages; ++stage) {
      // TMA: one arrival with the tile's byte count; cp.async: one arrival a producer thread.
      MbarrierInit(SharedAddress(&k_full[stage]), kTmaKv ? 1 : kProducerThreads);
      MbarrierInit(SharedAddress(&v_full[stage]), kTmaKv ? 1 : kProducerThreads);
      MbarrierInit(SharedAddress(&k_empty[stage]), kConsumerWarps * (kMulticastKv ? 2 : 1));
      MbarrierInit(SharedAddress(&v_empty[stage]), kConsumerWarps * (kMulticastKv ? 2 : 1));
    }
    if constexpr (kSplitKv) {
      MbarrierInit(SharedAddress(&merge_full), kConsumerThreadsFor<kHeadDim>);
      MbarrierInit(SharedAddress(&merge_done), kConsumerThreadsFor<kHeadDim>);
    }
    if constexpr (kSplitKv || kMulticastKv) FenceMbarrierInitCluster();
  }
  if constexpr (kSplitKv || kMulticastKv) {
    ClusterSync();  // the partner's barriers are initialised before anyone arrives on them
  } else {
    __syncthreads();
  }
  const int warp_group = threadIdx.x / 128;

  if (warp_group == 0) {
    // The producer: Q with tile 0, then each KV tile into its stage once the consumers have
    // emptied it.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegistersFor<kHeadDim>));
    const int thread = threadIdx.x;
    const int kv_head = qo_head / p.group_size;
    const T* k_base = static_cast<const T*>(p.k_cache) + kv_head * kHeadDim;
    const T* v_base = static_cast<const T*>(p.v_cache) + kv_head * kHeadDim;
    const T* q_base =
        static_cast<const T*>(p.q) +
        (static_cast<int64_t>(q_start + q_tile_start) * p.num_qo_heads + qo_head) * kHeadDim;
#pragma unroll 4
    for (int k = 0; k < kBlockM * kChunks / kProducerThreads; ++k) {
      const int i = thread + k * kProducerThreads;
      const int row = i / kChunks, chunk = i % kChunks;
      const bool valid = q_tile_start + row < q_len;
      const T* src = q_base + (valid ? row * p.q_row_stride + chunk * 8 : 0);
      CpAsync16(SharedAddress(q_smem + SlabOffset(kBlockM, row, chunk)), src, valid);
    }
    CpAsyncArriveOn(SharedAddress(&q_full));
    if constexpr (kTmaKv) {
      // K and V released apart: warp 0 loads K, warp 1 V, each waiting only for its own half
      // of the stage. Released together: warp 0 loads both. Lane b loads box b (rows
      // 16b..16b + 15) of each tile, every slab; lane 0 announces the tile's bytes first. Boxes
      // from kv_end on are not loaded (the consumers zero those V rows and mask those keys).
      // Multicast: the block of rank r loads the boxes b with b % 2 == r, into both blocks, and
      // each block's lane 0 still announces the whole tile's bytes on its own barrier (the
      // partner's bytes may land first: the count of bytes to come goes below zero, and the
      // phase cannot complete before this arrival).
      if (thread >= kTmaLanes) {
        CpAsyncWait<0>();
        return;
      }
      constexpr uint32_t kBoxBytes = kBoxRows * kSlab * sizeof(T);
      const int lane = thread % 32;
      const bool loads_v = thread >= 32;
      uint64_t* const empty = loads_v || !kReleaseKApart ? v_empty : k_empty;
      int next_page = first_page;
      for (int t = 0; t < num_kv_tiles; ++t) {
        const int stage = t % kStages;
        const int page = next_page;
        if (t + 1 < num_kv_tiles) next_page = read_box_page(t + 1, lane);
        if (t >= kStages) MbarrierWait(SharedAddress(&empty[stage]), (t / kStages - 1) & 1);
        const int j = t * kBlockN + lane * kBoxRows;
        const int boxes = min(kBoxes, (kv_end - t * kBlockN + kBoxRows - 1) / kBoxRows);
        const uint32_t tile_bytes = boxes * (kHeadDim / kSlab) * kBoxBytes;
        const int slot = PagedSlot(page, j + kv_base, p.log2_page_size);
        auto load = [&](const CUtensorMap& map, T* tile, uint64_t* full) {
          const uint32_t barrier = SharedAddress(full);
          if (lane == 0) MbarrierArriveExpectBytes(barrier, tile_bytes);
          __syncwarp();
          if (lane < boxes && (!kMulticastKv || lane % 2 == static_cast<int>(cluster_rank))) {
#pragma unroll
            for (int slab = 0; slab < kHeadDim / kSlab; ++slab) {
              const uint32_t box = SharedAddress(tile + (slab * kBlockN + lane * kBoxRows) * kSlab);
              if constexpr (kMulticastKv) {
                TmaLoad3dMulticast(box, map, slab * kSlab, kv_head, static_cast<int>(slot),
                                   barrier, 0b11);
              } else {
                TmaLoad3d(box, map, slab * kSlab, kv_head, static_cast<int>(slot), barrier);
              }
            }
          }
        };
        if (!loads_v) load(maps.k, k_smem + stage * kTileElements, &k_full[stage]);
        if (loads_v || !kReleaseKApart) {
          load(maps.v, v_smem + stage * kTileElements, &v_full[stage]);
        }
      }
      CpAsyncWait<0>();
      return;
    }
    // Two threads a row, one page-table read each per row; the pair's 16-byte chunks are
    // adjacent, so a warp reads whole 32-byte sectors. The next tile's page entries are read
    // before waiting for its stage, so their latency hides behind the wait.
    // Pairs of threads take rows kProducerThreads / 2 apart; with fewer rows than pairs some
    // pairs idle.
    constexpr int kRowsPerThread = (kBlockN * 2 + kProducerThreads - 1) / kProducerThreads;
    constexpr bool kAllPairsBusy = (kBlockN * 2) % kProducerThreads == 0;
    const int half = thread % 2;
    auto read_pages = [&](int t, int(&page)[kRowsPerThread]) {
#pragma unroll
      for (int k = 0; k < kRowsPerThread; ++k) {
        const int row = thread / 2 + k * (kProducerThreads / 2);
        const int j = t * kBlockN + row;
        page[k] = (kAllPairsBusy || row < kBlockN) && j < kv_end
                      ? __ldg(pages + ((j + kv_base) >> p.log2_page_size))
                      : 0;
      }
    };
    int next_page[kRowsPerThread];
    read_pages(0, next_page);
    for (int t = 0; t < num_kv_tiles; ++t) {
      const int stage = t % kStages;
      int page[kRowsPerThread];
#pragma unroll
      for (int k = 0; k < kRowsPerThread; ++k) page[k] = next_page[k];
      if (t + 1 < num_kv_tiles) read_pages(t + 1, next_page);
      // K first, then V, each announced on its own barrier. The row offsets are worked out
      // again for V: the producer has 40 registers (32 beside three consumers).
      auto copy_tile = [&](const T* base, T* tile) {
#pragma unroll
        for (int k = 0; k < kRowsPerThread; ++k) {
          const int row = thread / 2 + k * (kProducerThreads / 2);
          if (!kAllPairsBusy && row >= kBlockN) break;
          const int j = t * kBlockN + row;
          const bool valid = j < kv_end;
          const int64_t row_offset =
              valid ? PagedSlot(page[k], j + kv_base, p.log2_page_size) * p.kv_row_stride +
                          half * 8
                    : 0;
          // Unrolled fully, ptxas keeps every K address live for V and spills at 40 registers.
#pragma unroll 2
          for (int c = 0; c < kChunks / 2; ++c) {
            CpAsync16(SharedAddress(tile + SlabOffset(kBlockN, row, 2 * c + half)),
                      base + row_offset + c * 16, valid);
          }
        }
      };
      const uint32_t parity = (t / kStages - 1) & 1;
      if (t >= kStages) {
        MbarrierWait(SharedAddress(kReleaseKApart ? &k_empty[stage] : &v_empty[stage]), parity);
      }
      copy_tile(k_base, k_smem + stage * kTileElements);
      CpAsyncArriveOn(SharedAddress(&k_full[stage]));
      if (kReleaseKApart && t >= kStages) MbarrierWait(SharedAddress(&v_empty[stage]), parity);
      copy_tile(v_base, v_smem + stage * kTileElements);
      CpAsyncArriveOn(SharedAddress(&v_full[stage]));
    }
    CpAsyncWait<0>();
    return;
  }

  // The consumers: kConsumerGroups warpgroups of 64 query rows each.
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegistersFor<kHeadDim>));
  const int consumer = warp_group - 1;
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int group = lane >> 2, quad_lane = lane & 3;
  const int warp_row0 = consumer * 64 + warp * 16;  // block row of the warp's 16 rows
  const int qpos0 = q_tile_start + warp_row0 + group + shift;
  const int warp_first_pos = q_tile_start + warp_row0 + shift;
  // cp.async writes through the generic proxy, so wgmma (the async proxy) needs a fence after
  // them; TMA writes through the async proxy itself.
  auto wait_k = [&](int t) {
    MbarrierWait(SharedAddress(&k_full[t % kStages]), (t / kStages) & 1);
    if constexpr (!kTmaKv) FenceProxyAsync();
  };
  auto wait_v = [&](int t) {
    MbarrierWait(SharedAddress(&v_full[t % kStages]), (t / kStages) & 1);
    if constexpr (kTmaKv) {
      const int first_unused = kv_end - t * kBlockN;
      if (first_unused < kBlockN) {
        ZeroVRowsFrom<kBlockN, kHeadDim>(v_smem + (t % kStages) * kTileElements, first_unused,
                                         kOwnBarrier0 + consumer);
      }
    } else {
      FenceProxyAsync();
    }
  };
  auto wait_q = [&]() {
    MbarrierWait(SharedAddress(&q_full), 0);
    FenceProxyAsync();
  };
  // Multicast: lane 0 arrives on this block's barrier and lane 1 on the partner's, both of whose
  // producers overwrite the stage (the wgmmas that read it have completed: nothing is left to
  // release at cluster scope, which cost 45% as mbarrier.arrive.release.cluster). The last
  // kStages tiles' releases are not waited for, and are left out so that no arrival reaches a
  // partner that may have finished.
  auto release = [&](uint64_t* empty, int t) {
    __syncwarp();
    if constexpr (kMulticastKv) {
      if (lane < 2 && t + kStages < num_kv_tiles) {
        MbarrierArriveCluster(MapShared(SharedAddress(&empty[t % kStages]), cluster_rank ^ lane));
      }
    } else {
      MbarrierArriveIf(SharedAddress(&empty[t % kStages]), lane == 0);
    }
  };
  // Ping-pong turns (sm90::ConsumerTurns).
  const sm90::ConsumerTurns<kConsumerGroups> turns(consumer);
  auto take_turn = [&]() { turns.Take(); };
  auto pass_turn = [&]() { turns.Pass(); };
  if (consumer == kConsumerGroups - 1) pass_turn();

  const QDescriptors<kBlockM> q_desc(q_smem, consumer);
  const KvStageDescriptors<T, kBlockN, kHeadDim> kv_desc(k_smem, v_smem);

  float s[kBlockN / 2];   // S, then P, of the warpgroup's 64 rows x kBlockN keys
  float o[kHeadDim / 2];  // O of 64 rows x head_dim
  uint32_t pa[kBlockN / 16][4];
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) s[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) o[i] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};

  // Q stays in shared memory, both operands of S = Q K^T read by descriptor. (Head_dim 128 kept
  // Q in registers, 32 a thread, until they were worth more elsewhere: from shared memory H200
  // 4k causal went +2%, full within 0.3%.)
  auto issue_qk = [&](int stage) {
#pragma unroll
    for (int k_step = 0; k_step < kHeadDim / 16; ++k_step) {
      WgmmaFromShared<T, kBlockN>(s, q_desc.Step(k_step), kv_desc.K(stage, k_step), k_step > 0);
    }
  };
  auto issue_pv = [&](int stage) {
#pragma unroll
    for (int key_step = 0; key_step < kBlockN / 16; ++key_step) {
      WgmmaFromRegisters<T, kHeadDim>(o, pa[key_step], kv_desc.V(stage, key_step));
    }
  };
  auto softmax = [&](int t, float(&correction)[2]) {
    sm90::SoftmaxTile<kBlockN, kCausal>(
        s, row_max, row_sum, correction,
        {.kv0 = t * kBlockN + kv_base, .kv_len = kv_len, .qpos0 = qpos0,
         .warp_first_pos = warp_first_pos, .quad_lane = quad_lane},
        p.scale_log2);
  };
  auto pack_p = [&]() { PackP<T, kBlockN>(s, pa); };

  wait_q();
  sm90::RunKvTiles<kStages, kReleaseKApart, kHeadDim == 64>(
      num_kv_tiles, o, s,
      sm90::KvTileSteps{wait_k, wait_v, [&](int t) { release(k_empty, t); },
                        [&](int t) { release(v_empty, t); }, take_turn, pass_turn, issue_qk,
                        issue_pv, softmax, pack_p});
  // The last consumer passed one turn more than consumer 0 took (the first); take it, so that
  // every named barrier ends empty.
  if (consumer == 0) take_turn();
  WgmmaWait<0>();
  PinRegisters(o);
  if constexpr (kSplitKv) {
    // Rank 1 leaves its partial in its own slots and waits until rank 0 has read them; rank 0
    // weighs both halves by 2^(their max - the larger) and goes on to write O as one block.
    constexpr int kSlot = kMergeSlotFloats<kHeadDim>;
    float* const slot = reinterpret_cast<float*>(v_smem + kStages * kTileElements) +
                        (threadIdx.x - kProducerThreads) * kSlot;
    if (ClusterCtaRank() == 1) {
#pragma unroll
      for (int i = 0; i < kHeadDim / 2; i += 4) {
        *reinterpret_cast<float4*>(slot + i) = float4{o[i], o[i + 1], o[i + 2], o[i + 3]};
      }
      *reinterpret_cast<float4*>(slot + kHeadDim / 2) =
          float4{row_max[0], row_max[1], row_sum[0], row_sum[1]};
      MbarrierArriveRemote(MapShared(SharedAddress(&merge_full), 0));
      MbarrierWait<true>(SharedAddress(&merge_done), 0);
      return;
    }
    MbarrierWait<true>(SharedAddress(&merge_full), 0);
    const uint32_t remote = MapShared(SharedAddress(slot), 1);
    MergePartial<kHeadDim>(o, row_max, row_sum, LoadSharedCluster(remote + kHeadDim / 2 * 4),
                           [&](int i) { return LoadSharedCluster(remote + i * 4); });
    MbarrierArriveRemote(MapShared(SharedAddress(&merge_done), 1));
  }

  WriteOutputRows<T, kHeadDim, kBlockM>(
      o, row_max, row_sum, q_smem,
      {.consumer = consumer, .warp_row0 = warp_row0, .group = group, .quad_lane = quad_lane,
       .q_tile_start = q_tile_start, .q_len = q_len, .q_start = q_start, .qo_head = qo_head,
       .o = p.o, .lse = p.lse, .num_qo_heads = p.num_qo_heads},
      kOwnBarrier0 + consumer);
#else
  __trap();  // built for sm_90a only; LaunchPrefill checks the device first
#endif
}

// Pieces the two persistent grids (whole units, stream-K) share.
// A unit of work: the plain grid's block. PersistentUnitAt numbers them as the plain grid does
// (query head fastest, then query tile, then sequence: the stream-K grid's order),
// KvHeadMajorUnitAt by KV head (the whole-unit grid's).
struct PersistentUnit {
  int qo_head, seq, q_tile_start;
};
template <int kBlockM>
__device__ __forceinline__ PersistentUnit PersistentUnitAt(int u, int num_qo_heads, int q_tiles) {
  const int heads_tiles = num_qo_heads * q_tiles;
  return PersistentUnit{u % num_qo_heads, u / heads_tiles, (u / num_qo_heads) % q_tiles * kBlockM};
}

// The whole-unit grid's order: the query heads of one KV head fastest, then query tile, then KV
// head, then sequence, so that the blocks running at once read the tiles of one or two KV heads
// (at 16k keys and head_dim 128 the eight KV heads' K and V, 64 MiB, outgrow the L2; one KV
// head's 8 MiB does not).
template <int kBlockM>
__device__ __forceinline__ PersistentUnit KvHeadMajorUnitAt(int u, int group_size,
                                                            int num_kv_heads, int q_tiles) {
  const int in_group = u % group_size;
  const int tiles_heads_seqs = u / group_size;
  const int q_tile = tiles_heads_seqs % q_tiles;
  const int heads_seqs = tiles_heads_seqs / q_tiles;
  const int kv_head = heads_seqs % num_kv_heads;
  return PersistentUnit{kv_head * group_size + in_group, heads_seqs / num_kv_heads,
                        q_tile * kBlockM};
}

// By the block's first thread: the tensor maps fetched, then the barriers set up (two Q buffers,
// filled by TMA and emptied by every consumer warp, and each stage's K and V).
__device__ __forceinline__ void PrefetchPersistentMaps(const KvTensorMaps& maps,
                                                       const QoTensorMaps& qo) {
  PrefetchTensorMap(maps.k);
  PrefetchTensorMap(maps.v);
  PrefetchTensorMap(qo.q);
  PrefetchTensorMap(qo.o);
}
template <int kStages, int kConsumerWarps>
__device__ __forceinline__ void InitPersistentBarriers(uint64_t* q_full, uint64_t* q_empty,
                                                       uint64_t* k_full, uint64_t* v_full,
                                                       uint64_t* k_empty, uint64_t* v_empty) {
#pragma unroll
  for (int b = 0; b < 2; ++b) {
    MbarrierInit(SharedAddress(&q_full[b]), 1);
    MbarrierInit(SharedAddress(&q_empty[b]), kConsumerWarps);
  }
#pragma unroll
  for (int stage = 0; stage < kStages; ++stage) {
    MbarrierInit(SharedAddress(&k_full[stage]), 1);
    MbarrierInit(SharedAddress(&v_full[stage]), 1);
    MbarrierInit(SharedAddress(&k_empty[stage]), kConsumerWarps);
    MbarrierInit(SharedAddress(&v_empty[stage]), kConsumerWarps);
  }
}

// Where a unit's rows of O go (q_start, q_len, qo_head, q_tile_start), beside its Q buffer.
using UnitRows = int4;

// The K warp's lane 0: Q of the block's i-th unit (or piece) into buffer i % 2, once the
// consumers have written unit i - 2's O out through it; with `rows`, where the unit's rows of O
// go into rows[i % 2] too (seen by the consumers once they have waited for the Q, the
// barrier's arrival releasing it), so that their write-out takes them from shared memory
// instead of working them out again between the last P V and the stores (H200, same call: the
// whole-unit grid 176 instructions shorter, head_dim 64 1k +1.3%, head_dim 128 2k-8k level).
template <typename T, int kBlockM, int kHeadDim>
__device__ __forceinline__ void LoadPersistentQ(int i, const CUtensorMap& q_map,
                                                const PersistentUnit& unit,
                                                const int32_t* q_indptr, T* q_smem0,
                                                uint64_t* q_full, uint64_t* q_empty,
                                                UnitRows* rows = nullptr) {
  const int buf = i & 1;
  if (i >= 2) MbarrierWait(SharedAddress(&q_empty[buf]), ((i >> 1) - 1) & 1);
  const int q_start = q_indptr[unit.seq];
  const int q_row = q_start + unit.q_tile_start;
  if (rows != nullptr) {
    rows[buf] = UnitRows{q_start, q_indptr[unit.seq + 1] - q_start, unit.qo_head,
                         unit.q_tile_start};
  }
  const uint32_t barrier = SharedAddress(&q_full[buf]);
  MbarrierArriveExpectBytes(barrier, kBlockM * kHeadDim * sizeof(T));
  T* const q_buffer = q_smem0 + buf * kBlockM * kHeadDim;
#pragma unroll
  for (int slab = 0; slab < kHeadDim / kSlab; ++slab) {
    TmaLoad3d(SharedAddress(q_buffer + slab * kBlockM * kSlab), q_map, slab * kSlab,
              unit.qo_head, q_row, barrier);
  }
}

// A consumer warp, once it and its stores are done reading a Q buffer (q_empty: that buffer's
// barrier): the buffer given back to the K warp (LoadPersistentQ), the reads (generic proxy)
// ordered before the TMA (async proxy) that writes the next Q there.
__device__ __forceinline__ void GiveQBufferBack(uint64_t* q_empty) {
  FenceProxyAsync();
  __syncwarp();
  if (threadIdx.x % 32 == 0) MbarrierArrive(SharedAddress(q_empty));
}

// The whole-unit persistent grid (head_dim 128, and 64 up to 1024 keys; no causal mask, a uniform
// batch whose KV tiles fill the stages evenly): one block an SM, two consumers, runs the work units
// b, b + gridDim.x, ... (a unit: 128 query rows of one head and sequence; the query heads of a KV
// head fastest, then query tile, then KV head, then sequence: KvHeadMajorUnitAt; H200, same call:
// 12k +3.3%, 16k +9% and steady from round to round, 8k +0.8%, 2k level). What a block of the plain
// grid pays once runs under the previous unit's work: the K warp loads each unit's Q by TMA as it
// starts the unit's K tiles, the stages run on across units, and the consumers issue a unit's first
// S = Q K^T with the previous unit's last P V. Each unit starts at stage 0 and takes Q buffer i % 2
// (i: the block's count of units), counters of loops that start at 0, so that ptxas keeps the wgmma
// descriptors in uniform registers.
struct PersistentUnits {
  int units;         // query heads x query tiles x sequences
  int q_tiles;       // per sequence
  int num_kv_tiles;  // per unit, a multiple of the stages
  int total_q;       // where the last sequence ends: TMA drops its rows past it
};

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(ThreadsWith(kWholeUnitGroups), 1)
    PrefillSm90PersistentKernel(const __grid_constant__ PrefillKernelParams p,
                                const __grid_constant__ KvTensorMaps maps,
                                const __grid_constant__ QoTensorMaps qo,
                                const PersistentUnits work) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kBlockM = kWholeUnitBlockM;
  constexpr int kConsumerGroups = kWholeUnitGroups;
  constexpr int kConsumerWarps = kConsumerGroups * 4;
  constexpr int kOwnBarrier0 = 1 + kConsumerGroups;
  constexpr int kBlockN = kBlockNFor<kHeadDim>;
  constexpr int kStages = kWholeUnitStages;
  constexpr int kTileElements = kBlockN * kHeadDim;
  constexpr int kSlabs = kHeadDim / kSlab;

  extern __shared__ uint8_t shared_raw[];
  __shared__ uint64_t q_full[2], q_empty[2];
  __shared__ UnitRows unit_rows[2];
  __shared__ uint64_t k_full[kStages], v_full[kStages], k_empty[kStages], v_empty[kStages];
  const uint32_t raw_address = SharedAddress(shared_raw);
  T* q_smem0 = reinterpret_cast<T*>(
      shared_raw + (((raw_address + kSwizzleAlign - 1) & ~(kSwizzleAlign - 1)) - raw_address));
  T* k_smem = q_smem0 + 2 * kBlockM * kHeadDim;  // [stages][slabs][kBlockN][64]
  T* v_smem = k_smem + kStages * kTileElements;

  const int num_kv_tiles = work.num_kv_tiles;
  auto unit_at = [&](int u) {
    return KvHeadMajorUnitAt<kBlockM>(u, p.group_size, p.num_qo_heads / p.group_size,
                                      work.q_tiles);
  };

  if (threadIdx.x == 0) {
    PrefetchPersistentMaps(maps, qo);
    InitPersistentBarriers<kStages, kConsumerWarps>(q_full, q_empty, k_full, v_full, k_empty,
                                                    v_empty);
  }
  __syncthreads();
  const int warp_group = threadIdx.x / 128;

  if (warp_group == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(
        ProducerRegistersWith(kConsumerGroups)));
    // Warp 0 loads Q and K, warp 1 V; lane b issues box b of each tile.
    if (threadIdx.x >= 64) return;
    constexpr int kBoxes = kBlockN / kBoxRows;
    constexpr uint32_t kBoxBytes = kBoxRows * kSlab * sizeof(T);
    const int lane = threadIdx.x % 32;
    // One copy of the loop a warp, so that the tensor map's address is a constant of it (chosen
    // at run time, it took three more uniform-register moves a TMA load).
    auto issue_loads = [&](auto loads_v_constant) {
      constexpr bool loads_v = decltype(loads_v_constant)::value;
      uint64_t* const empty = loads_v ? v_empty : k_empty;
      uint64_t* const full = loads_v ? v_full : k_full;
      const CUtensorMap& map = loads_v ? maps.v : maps.k;
      T* const tiles = loads_v ? v_smem : k_smem;
      int g = 0;  // KV tiles this warp has issued over all units
      for (int u = blockIdx.x, i = 0; u < work.units; u += gridDim.x, ++i) {
        const PersistentUnit unit = unit_at(u);
        const int kv_head = unit.qo_head / p.group_size;
        const int32_t* const pages = p.page_indices + p.page_indptr[unit.seq];
        const int kv_end = p.kv_lens[unit.seq];
        auto read_page = [&](int t) {
          const int j = t * kBlockN + lane * kBoxRows;
          return lane < kBoxes && j < kv_end ? __ldg(pages + (j >> p.log2_page_size)) : 0;
        };
        if (!loads_v && lane == 0) {
          LoadPersistentQ<T, kBlockM, kHeadDim>(i, qo.q, unit, p.q_indptr, q_smem0, q_full,
                                                q_empty, unit_rows);
        }
        int next_page = read_page(0);
        for (int t = 0; t < num_kv_tiles; ++t, ++g) {
          const int stage = t % kStages;
          const int j = t * kBlockN + lane * kBoxRows;
          const int page = next_page;
          if (t + 1 < num_kv_tiles) next_page = read_page(t + 1);
          if (g >= kStages) MbarrierWait(SharedAddress(&empty[stage]), (g / kStages - 1) & 1);
          const int boxes = min(kBoxes, (kv_end - t * kBlockN + kBoxRows - 1) / kBoxRows);
          const uint32_t barrier = SharedAddress(&full[stage]);
          if (lane == 0) {
            MbarrierArriveExpectBytes(barrier, boxes * kSlabs * kBoxBytes);
          }
          __syncwarp();
          if (lane < boxes) {
            const int slot = PagedSlot(page, j, p.log2_page_size);
#pragma unroll
            for (int slab = 0; slab < kSlabs; ++slab) {
              TmaLoad3d(SharedAddress(tiles + stage * kTileElements +
                                      (slab * kBlockN + lane * kBoxRows) * kSlab),
                        map, slab * kSlab, kv_head, slot, barrier);
            }
          }
        }
      }
    };
    if (threadIdx.x < 32) {
      issue_loads(std::false_type{});
    } else {
      issue_loads(std::true_type{});
    }
    return;
  }

  // The consumers: the plain kernel's tile pass (sm90::RunKvTiles) written out across units; the
  // turns run on from unit to unit, and the last tile's V is released too (the producer's next
  // unit refills its stage).
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(
      ConsumerRegistersWith(kConsumerGroups)));
  const int consumer = warp_group - 1;
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int group = lane >> 2, quad_lane = lane & 3;
  const int warp_row0 = consumer * 64 + warp * 16;
  const KvStageDescriptors<T, kBlockN, kHeadDim> kv_desc(k_smem, v_smem);
  const sm90::ConsumerTurns<kConsumerGroups> turns(consumer);
  auto take_turn = [&]() { turns.Take(); };
  auto pass_turn = [&]() { turns.Pass(); };
  if (consumer == kConsumerGroups - 1) pass_turn();

  // Every unit has the same KV length (a uniform batch) and tile count.
  const int kv_len = p.kv_lens[0];
  // Tile t of unit i is fill i * (tiles / kStages) + t / kStages of stage t % kStages: the
  // parity its full barriers are waited on with is phase_of(i) ^ (t / kStages) & 1.
  auto phase_of = [&](int i) { return static_cast<uint32_t>(i * (num_kv_tiles / kStages)) & 1; };
  auto release = [&](uint64_t* empty, int stage) {
    __syncwarp();
    MbarrierArriveIf(SharedAddress(&empty[stage]), lane == 0);
  };
  float s[kBlockN / 2];
  float o[kHeadDim / 2];
  uint32_t pa[kBlockN / 16][4];
#pragma unroll
  for (int e = 0; e < kBlockN / 2; ++e) s[e] = 0.0f;
#pragma unroll
  for (int e = 0; e < kHeadDim / 2; ++e) o[e] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
  float correction[2];
  auto issue_qk = [&](const QDescriptors<kBlockM>& q_desc, int stage) {
#pragma unroll
    for (int k_step = 0; k_step < kHeadDim / 16; ++k_step) {
      WgmmaFromShared<T, kBlockN>(s, q_desc.Step(k_step), kv_desc.K(stage, k_step), k_step > 0);
    }
  };
  auto issue_pv = [&](int stage) {
#pragma unroll
    for (int key_step = 0; key_step < kBlockN / 16; ++key_step) {
      WgmmaFromRegisters<T, kHeadDim>(o, pa[key_step], kv_desc.V(stage, key_step));
    }
  };
  auto softmax = [&](int t) {
    const sm90::SoftmaxTilePlace place{.kv0 = t * kBlockN, .kv_len = kv_len, .qpos0 = 0,
                                       .warp_first_pos = 0, .quad_lane = quad_lane};
    if (t * kBlockN + kBlockN > kv_len) {
      sm90::SoftmaxTile<kBlockN, false>(s, row_max, row_sum, correction, place, p.scale_log2);
    } else {
      sm90::SoftmaxTile<kBlockN, false, false>(s, row_max, row_sum, correction, place,
                                               p.scale_log2);
    }
  };
  auto wait_v = [&](int t, uint32_t phase) {
    MbarrierWait(SharedAddress(&v_full[t % kStages]), phase ^ ((t / kStages) & 1));
    const int first_unused = kv_len - t * kBlockN;
    if (first_unused < kBlockN) {
      ZeroVRowsFrom<kBlockN, kHeadDim>(v_smem + (t % kStages) * kTileElements, first_unused,
                                       kOwnBarrier0 + consumer);
    }
  };

  // Unit 0's first S = Q K^T and softmax; every later unit's run under the unit before it.
  MbarrierWait(SharedAddress(&q_full[0]), 0);
  MbarrierWait(SharedAddress(&k_full[0]), 0);
  take_turn();
  WgmmaFence();
  issue_qk(QDescriptors<kBlockM>(q_smem0, consumer), 0);
  WgmmaCommit();
  pass_turn();
  WgmmaWait<0>();
  PinRegisters(s);
  release(k_empty, 0);
  softmax(0);
  // Tile t opens once P V of tile t - 1 is done: O rescaled, P packed, V of tile t waited for.
  auto open_tile = [&](int t, uint32_t phase) {
    WgmmaWait<0>();
    PinRegisters(o);
    if (t > 0) release(v_empty, (t - 1) % kStages);
    sm90::RescaleRows<kHeadDim>(o, correction);
    PackP<T, kBlockN>(s, pa);
    wait_v(t, phase);
  };
  // One step of unit i's tile pass: P V of tile t issued with S of tile t + 1, as in
  // sm90::RunKvTiles; after_issue runs once both are issued.
  auto tile_step = [&](int t, uint32_t phase, const QDescriptors<kBlockM>& q_desc,
                       auto&& after_issue) {
    open_tile(t, phase);
    MbarrierWait(SharedAddress(&k_full[(t + 1) % kStages]), phase ^ (((t + 1) / kStages) & 1));
    take_turn();
    WgmmaFence();
    issue_qk(q_desc, (t + 1) % kStages);
    WgmmaCommit();
    issue_pv(t % kStages);
    WgmmaCommit();
    pass_turn();
    after_issue();
    WgmmaWait<1>();
    PinRegisters(s);
    release(k_empty, (t + 1) % kStages);
    softmax(t + 1);
  };
  // Tiles 0 .. n - 2 of unit i, then the last tile opened (n >= 2, a multiple of the stages);
  // after_step(t) runs once tile t's P V and tile t + 1's S are issued.
  auto run_tiles_but_last = [&](int i, auto&& after_step) {
    const uint32_t phase = phase_of(i);
    const QDescriptors<kBlockM> q_desc(q_smem0 + (i & 1) * kBlockM * kHeadDim, consumer);
    for (int t = 0; t + 1 < num_kv_tiles; ++t) {
      tile_step(t, phase, q_desc, [&] { after_step(t); });
    }
    open_tile(num_kv_tiles - 1, phase);
  };
  // Where unit i's rows of O go, from beside its Q buffer.
  auto output_rows = [&](int i) {
    const UnitRows rows = unit_rows[i & 1];  // (q_start, q_len, qo_head, q_tile_start)
    return OutputRows{.consumer = consumer, .warp_row0 = warp_row0, .group = group,
                      .quad_lane = quad_lane, .q_tile_start = rows.w, .q_len = rows.y,
                      .q_start = rows.x, .qo_head = rows.z, .o = p.o, .lse = p.lse,
                      .num_qo_heads = p.num_qo_heads};
  };
  // Unit i's staged rows of O sent out; once the stores have read them, its Q buffer given back.
  auto send_out = [&](int i) {
    const OutputRows at = output_rows(i);
    SendStagedRows<T, kHeadDim, kBlockM, false>(q_smem0 + (i & 1) * kBlockM * kHeadDim, at,
                                                qo.o, at.q_start + at.q_len == work.total_q);
  };
  auto give_q_back = [&](int i) {
    if (lane == 0) TmaStoreWaitRead<0>();
    GiveQBufferBack(&q_empty[i & 1]);
  };
  auto stage_out = [&](int i, const float(&done_max)[2], const float(&done_sum)[2]) {
    WgmmaWait<0>();
    PinRegisters(o);
    release(v_empty, (num_kv_tiles - 1) % kStages);
    StageOutputRows<T, kHeadDim, kBlockM, true>(o, done_max, done_sum,
                                                q_smem0 + (i & 1) * kBlockM * kHeadDim,
                                                output_rows(i));
  };
  // Every unit but the block's last: the last tile's P V issued with the next unit's first
  // S = Q K^T (Q in the other buffer, K in stage 0), whose softmax runs under it; O is then
  // staged in the Q buffer, sent out by TMA only once the next unit's first step has issued its
  // wgmmas, and the buffer given back a step later, once the stores have read it: the tensor
  // cores have work through the write-out (H200, same call: head_dim 128 full 2k +1.6%, 4k
  // +0.6%). The staged values stay in shared memory, not registers: 32 more registers live
  // across the tile loop cost 1.5% at 4k-8k. (No branch on the unit inside: one around the
  // wgmmas made ptxas serialise every wgmma of the kernel.)
  const int block_units = (work.units - static_cast<int>(blockIdx.x) + gridDim.x - 1) / gridDim.x;
  int i = 0;
  run_tiles_but_last(0, [](int) {});
  for (; i + 1 < block_units; ++i) {
    MbarrierWait(SharedAddress(&q_full[(i + 1) & 1]), ((i + 1) >> 1) & 1);
    MbarrierWait(SharedAddress(&k_full[0]), phase_of(i + 1));
    take_turn();
    WgmmaFence();
    issue_qk(QDescriptors<kBlockM>(q_smem0 + ((i + 1) & 1) * kBlockM * kHeadDim, consumer), 0);
    WgmmaCommit();
    issue_pv((num_kv_tiles - 1) % kStages);
    WgmmaCommit();
    pass_turn();
    float done_max[2], done_sum[2];
    sm90::RestartRows(row_max, row_sum, done_max, done_sum);
    WgmmaWait<1>();
    PinRegisters(s);
    release(k_empty, 0);
    softmax(0);
    stage_out(i, done_max, done_sum);
#pragma unroll
    for (int e = 0; e < kHeadDim / 2; ++e) o[e] = 0.0f;
    run_tiles_but_last(i + 1, [&](int t) {
      if (t == 0) send_out(i);
      if (t == 1 || num_kv_tiles == 2) give_q_back(i);
    });
  }
  // The block's last unit ends as the plain kernel's does.
  take_turn();
  WgmmaFence();
  issue_pv((num_kv_tiles - 1) % kStages);
  WgmmaCommit();
  pass_turn();
  stage_out(i, row_max, row_sum);
  send_out(i);
  give_q_back(i);
  if (consumer == 0) take_turn();
#else
  __trap();
#endif
}

// The stream-K persistent grid (head_dim 64 without a causal mask, a uniform batch): one block
// an SM. A unit is the plain grid's block (query head fastest, then query tile, then sequence). The
// units [0, whole_units) run whole, block b taking b, b + gridDim.x, ...; the KV tiles of the
// rest (the last two rounds' units, fewer than two a block) are dealt out in even contiguous
// ranges, block b the b-th (stream-K), so that no SM idles through a short last round. A range
// is at least a unit long: a unit is cut between two blocks at most, b - 1 holding its first
// tiles and b its last. Each block walks its range from the top down, so the first tiles of a
// cut unit are block b - 1's first work there and its last tiles block b's last: b - 1 hands
// its partial O, row maxima and sums over through the workspace as soon as it has them, and b
// takes them over at its end (a block waits only on a block launched before it, for work that
// block did first). What a block of the plain grid pays once runs under the previous piece's
// work: the K warp loads each piece's Q by TMA (buffer i % 2, i: the block's count of pieces) as
// it starts the piece's K tiles, the stages run on from piece to piece (tile g of the block's
// run in stage g % kStages), and the consumers issue a piece's first S = Q K^T with the previous
// piece's last P V, then write that piece's O out (or hand it over) under the next one's first
// softmax. H200, same call: full 2k 86.0 -> 82.4 us (0.943x -> 0.978x of cuDNN), 3k and 4k
// +2.8% and +3.6% (docs/gpu-runs/attention-prefill-stream-k-overlap-h200.md).

struct StreamKUnits {
  int units;         // query heads x query tiles x sequences
  int q_tiles;       // per sequence
  int num_kv_tiles;  // per unit
  int kv_len;        // every sequence's (a uniform batch): the last tile's keys follow
  int last_sequence;  // whose rows past its length TMA drops (the end of O)
  int whole_units;   // a multiple of gridDim.x, or units
  // Block b's stream-K tiles, numbered from unit whole_units's first: [bounds[b], bounds[b + 1])
  // (BalanceStreamKRanges: ranges of equal cost, not of equal tiles).
  int bounds[kMaxPersistentBlocks + 1];
  // The stream-K hand-over (null when whole_units == units): block b's partial in slot b,
  // [kHeadDim / 8 + 1][consumer threads] float4s (O, then the row maxima and sums), and
  // ready[b][consumer warp], 1 once that warp's part is written, set back to 0 by its reader.
  float4* partials;
  uint32_t* ready;
};

// A block's share of the work, worked out once by its first thread (into shared memory): the
// pieces follow from it with adds, multiplies and comparisons only (with the divisions in every
// piece, the head_dim 64 consumers, at 160 registers, spilled).
struct StreamKBlockShare {
  int whole_pieces;  // units b, b + gridDim.x, ... below whole_units
  int low, high;     // its stream-K tiles [low, high), numbered from unit whole_units's first
  int top_unit;      // the unit (from whole_units) of tile high - 1
  int pieces;        // whole units and parts of units, at least one (the planner's ranges)

  // Without stream-K the bounds are all zero: no range.
  __device__ __forceinline__ static StreamKBlockShare Of(const StreamKUnits& work) {
    const int blocks = gridDim.x, block = blockIdx.x;
    StreamKBlockShare share;
    share.whole_pieces =
        block < work.whole_units ? (work.whole_units - block + blocks - 1) / blocks : 0;
    share.low = work.bounds[block];
    share.high = work.bounds[block + 1];
    share.top_unit = share.high > share.low ? (share.high - 1) / work.num_kv_tiles : 0;
    const int stream_k_pieces =
        share.high > share.low ? share.top_unit - share.low / work.num_kv_tiles + 1 : 0;
    share.pieces = share.whole_pieces + stream_k_pieces;
    return share;
  }
};

// Float4s a consumer thread hands over: its O, then (row max 0, row max 1, row sum 0, row sum 1).
template <int kHeadDim>
inline constexpr int kHandOverVectors = kHeadDim / 8 + 1;

// A stretch of one unit's KV tiles [t_begin, t_end) that a block runs.
struct StreamKPiece {
  int unit, t_begin, t_end;
  bool hands_over;  // the unit's last tiles are the next block's: hand the partial over
  bool takes_over;  // the unit's first tiles were the previous block's: merge its partial
};

// A value hidden from the compiler, so that what is worked out from it is worked out again where
// it is used rather than kept in registers from an earlier use (or hoisted out of a loop).
__device__ __forceinline__ int Opaque(int value) {
  int copy;
  asm volatile("mov.b32 %0, %1;\n" : "=r"(copy) : "r"(value));
  return copy;
}

__device__ __forceinline__ uint32_t LoadAcquireGpu(const uint32_t* address) {
  uint32_t value;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(value) : "l"(address) : "memory");
  return value;
}
__device__ __forceinline__ void StoreReleaseGpu(uint32_t* address, uint32_t value) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(address), "r"(value) : "memory");
}

// Piece i of this block's work (false past the last): its whole units, then its stream-K range
// from the top down. A function of i alone, so that the consumers, which have no register to
// spare, keep no walk between pieces and work it out again where they need it.
__device__ __forceinline__ bool PieceAt(const StreamKUnits& work,
                                        const StreamKBlockShare& share, int i,
                                        StreamKPiece& piece) {
  // The share is read through warp reductions, whose results land in uniform registers (a
  // shared-memory load's would take ordinary ones, which the consumers have none to spare).
  const int whole_pieces = __reduce_max_sync(0xffffffffu, share.whole_pieces);
  const int low = __reduce_max_sync(0xffffffffu, share.low);
  const int high = __reduce_max_sync(0xffffffffu, share.high);
  const int tpu = work.num_kv_tiles;
  if (i < whole_pieces) {
    piece = {static_cast<int>(blockIdx.x + i * gridDim.x), 0, tpu, false, false};
    return true;
  }
  const int unit = __reduce_max_sync(0xffffffffu, share.top_unit) - (i - whole_pieces);
  const int unit_first = unit * tpu;
  if (high <= low || unit_first + tpu <= low) return false;
  const int t_begin = max(low, unit_first) - unit_first;
  const int t_end = min(high, unit_first + tpu) - unit_first;
  const bool hands_over = t_end < tpu, takes_over = t_begin > 0;
  piece = {work.whole_units + unit, t_begin, t_end, hands_over, takes_over};
  return true;
}

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kThreadsFor<kHeadDim>, 1)
    PrefillSm90StreamKKernel(const __grid_constant__ PrefillKernelParams p,
                             const __grid_constant__ KvTensorMaps maps,
                             const __grid_constant__ QoTensorMaps qo,
                             const __grid_constant__ StreamKUnits work) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(kStreamKFor<kHeadDim>, "the stream-K grid is built for head_dim 64");
  constexpr int kBlockM = kBlockMFor<kHeadDim>;
  constexpr int kConsumerGroups = kConsumerGroupsFor<kHeadDim>;
  constexpr int kConsumerWarps = kConsumerGroups * 4;
  constexpr int kConsumerThreads = kConsumerGroups * 128;
  constexpr int kOwnBarrier0 = 1 + kConsumerGroups;
  constexpr int kBlockN = kBlockNFor<kHeadDim>;
  constexpr int kStages = kStagesFor<kHeadDim>;
  constexpr bool kReleaseKApart = kReleaseKApartFor<kHeadDim>;
  constexpr int kTileElements = kBlockN * kHeadDim;
  constexpr int kSlabs = kHeadDim / kSlab;

  extern __shared__ uint8_t shared_raw[];
  __shared__ uint64_t q_full[2], q_empty[2];
  __shared__ uint64_t k_full[kStages], v_full[kStages], k_empty[kStages], v_empty[kStages];
  __shared__ StreamKBlockShare share_smem;
  const StreamKBlockShare* const share = &share_smem;
  const uint32_t raw_address = SharedAddress(shared_raw);
  T* q_smem0 = reinterpret_cast<T*>(
      shared_raw + (((raw_address + kSwizzleAlign - 1) & ~(kSwizzleAlign - 1)) - raw_address));
  T* k_smem = q_smem0 + 2 * kBlockM * kHeadDim;  // [stages][slabs][kBlockN][64]
  T* v_smem = k_smem + kStages * kTileElements;

  auto unit_at = [&](int u) {
    return PersistentUnitAt<kBlockM>(u, p.num_qo_heads, work.q_tiles);
  };

  if (threadIdx.x == 0) {
    PrefetchPersistentMaps(maps, qo);
    share_smem = StreamKBlockShare::Of(work);
    InitPersistentBarriers<kStages, kConsumerWarps>(q_full, q_empty, k_full, v_full, k_empty,
                                                    v_empty);
  }
  __syncthreads();
  const int warp_group = threadIdx.x / 128;

  if (warp_group == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegistersFor<kHeadDim>));
    // Warp 0 loads Q and K, warp 1 V; lane b issues box b of each tile. Where K is not released
    // apart from V, both wait for the whole stage to be free (v_empty).
    if (threadIdx.x >= 64) return;
    constexpr int kBoxes = kBlockN / kBoxRows;
    constexpr uint32_t kBoxBytes = kBoxRows * kSlab * sizeof(T);
    const int lane = threadIdx.x % 32;
    // One copy of the loop a warp, so that the tensor map's address is a constant of it (chosen
    // at run time, it took three more uniform-register moves a TMA load).
    auto issue_loads = [&](auto loads_v_constant) {
      constexpr bool loads_v = decltype(loads_v_constant)::value;
      uint64_t* const empty = loads_v || !kReleaseKApart ? v_empty : k_empty;
      uint64_t* const full = loads_v ? v_full : k_full;
      const CUtensorMap& map = loads_v ? maps.v : maps.k;
      T* const tiles = loads_v ? v_smem : k_smem;
      int g = 0;  // KV tiles this warp has issued over all pieces
      StreamKPiece piece;
      for (int i = 0; PieceAt(work, *share, i, piece); ++i) {
        const PersistentUnit unit = unit_at(piece.unit);
        const int kv_head = unit.qo_head / p.group_size;
        const int32_t* const pages = p.page_indices + p.page_indptr[unit.seq];
        const int kv_end = p.kv_lens[unit.seq];
        auto read_page = [&](int t) {
          const int j = t * kBlockN + lane * kBoxRows;
          return lane < kBoxes && j < kv_end ? __ldg(pages + (j >> p.log2_page_size)) : 0;
        };
        if (!loads_v && lane == 0) {
          LoadPersistentQ<T, kBlockM, kHeadDim>(i, qo.q, unit, p.q_indptr, q_smem0, q_full,
                                                q_empty);
        }
        const int tiles_here = piece.t_end - piece.t_begin;
        int next_page = read_page(piece.t_begin);
        for (int r = 0; r < tiles_here; ++r, ++g) {
          const int stage = g % kStages;
          const int t = piece.t_begin + r;
          const int j = t * kBlockN + lane * kBoxRows;
          const int page = next_page;
          if (r + 1 < tiles_here) next_page = read_page(t + 1);
          if (g >= kStages) MbarrierWait(SharedAddress(&empty[stage]), (g / kStages - 1) & 1);
          const int boxes = min(kBoxes, (kv_end - t * kBlockN + kBoxRows - 1) / kBoxRows);
          const uint32_t barrier = SharedAddress(&full[stage]);
          if (lane == 0) {
            MbarrierArriveExpectBytes(barrier, boxes * kSlabs * kBoxBytes);
          }
          __syncwarp();
          if (lane < boxes) {
            const int slot = PagedSlot(page, j, p.log2_page_size);
#pragma unroll
            for (int slab = 0; slab < kSlabs; ++slab) {
              TmaLoad3d(SharedAddress(tiles + stage * kTileElements +
                                      (slab * kBlockN + lane * kBoxRows) * kSlab),
                        map, slab * kSlab, kv_head, slot, barrier);
            }
          }
        }
      }
    };
    if (threadIdx.x < 32) {
      issue_loads(std::false_type{});
    } else {
      issue_loads(std::true_type{});
    }
    return;
  }

  // The consumers: the plain kernel's tile pass (sm90::RunKvTiles, the last tile apart) once a
  // piece, its first S = Q K^T issued with the previous piece's last P V, whose softmax runs under
  // it, and the previous piece's O then written out (or handed over) while the other consumers
  // issue. The stages and turns run on from piece to piece; a piece's last V is released too.
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegistersFor<kHeadDim>));
  const int consumer = warp_group - 1;
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int group = lane >> 2, quad_lane = lane & 3;
  const int warp_row0 = consumer * 64 + warp * 16;
  const KvStageDescriptors<T, kBlockN, kHeadDim> kv_desc(k_smem, v_smem);
  const sm90::ConsumerTurns<kConsumerGroups> turns(consumer);
  auto take_turn = [&]() { turns.Take(); };
  auto pass_turn = [&]() { turns.Pass(); };
  if (consumer == kConsumerGroups - 1) pass_turn();

  // Tile g of the block's run over all its pieces is fill g / kStages of stage g % kStages, as
  // the producer counts them: a mask and a shift.
  static_assert((kStages & (kStages - 1)) == 0, "the stage of a tile is a mask of its index");
  auto stage_of = [](int g) { return g % kStages; };
  auto parity_of = [](int g) { return static_cast<uint32_t>(g / kStages) & 1; };
  auto release = [&](uint64_t* empty, int g) {
    __syncwarp();
    MbarrierArriveIf(SharedAddress(&empty[stage_of(g)]), lane == 0);
  };
  auto q_buffer = [&](int i) { return q_smem0 + (i & 1) * kBlockM * kHeadDim; };
  // Only a unit's last tile may hold keys past kv_len; the keys of a piece's last tile are one
  // number (a handing-over piece's last tile is not its unit's last).
  const int last_kv0 = (work.num_kv_tiles - 1) * kBlockN;
  auto last_tile_keys = [&](const StreamKPiece& piece) {
    return piece.hands_over ? kBlockN : work.kv_len - last_kv0;
  };
  // Q stays in shared memory, as in the plain kernel with three consumers.
  float s[kBlockN / 2];
  float o[kHeadDim / 2];
  uint32_t pa[kBlockN / 16][4];
#pragma unroll
  for (int e = 0; e < kBlockN / 2; ++e) s[e] = 0.0f;
#pragma unroll
  for (int e = 0; e < kHeadDim / 2; ++e) o[e] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
  float correction[2];
  auto issue_qk = [&](const QDescriptors<kBlockM>& q_desc, int g) {
#pragma unroll
    for (int k_step = 0; k_step < kHeadDim / 16; ++k_step) {
      WgmmaFromShared<T, kBlockN>(s, q_desc.Step(k_step), kv_desc.K(stage_of(g), k_step),
                                  k_step > 0);
    }
  };
  auto issue_pv = [&](int g) {
#pragma unroll
    for (int key_step = 0; key_step < kBlockN / 16; ++key_step) {
      WgmmaFromRegisters<T, kHeadDim>(o, pa[key_step], kv_desc.V(stage_of(g), key_step));
    }
  };
  // The other tiles' softmax is straight-line code, which ptxas schedules across the two rows (a
  // branch around the masking kept it from that). Without a causal mask the place matters only
  // for the masked tile.
  auto softmax = [&](bool ragged, int keys) {
    const sm90::SoftmaxTilePlace place{.kv0 = 0, .kv_len = keys, .qpos0 = 0,
                                       .warp_first_pos = 0, .quad_lane = quad_lane};
    if (ragged) {
      sm90::SoftmaxTile<kBlockN, false>(s, row_max, row_sum, correction, place, p.scale_log2);
    } else {
      sm90::SoftmaxTile<kBlockN, false, false>(s, row_max, row_sum, correction, place,
                                               p.scale_log2);
    }
  };
  // Tile g opens once P V of the tile before it is done: O rescaled, P packed, V waited for.
  auto open_tile = [&](int g, bool release_previous, bool ragged, int keys) {
    WgmmaWait<0>();
    PinRegisters(o);
    if (release_previous) release(v_empty, g - 1);
    sm90::RescaleRows<kHeadDim>(o, correction);
    PackP<T, kBlockN>(s, pa);
    MbarrierWait(SharedAddress(&v_full[stage_of(g)]), parity_of(g));
    if (ragged) {
      ZeroVRowsFrom<kBlockN, kHeadDim>(v_smem + stage_of(g) * kTileElements, keys,
                                       kOwnBarrier0 + consumer);
    }
  };
  // Piece i from its first tile's softmax (S issued before) to its last tile opened: P V of tile
  // t issued with S of tile t + 1, as in sm90::RunKvTiles. Returns the piece's tile count.
  auto run_tiles_but_last = [&](int i, int g0) {
    StreamKPiece piece;
    PieceAt(work, *share, i, piece);
    const int tiles_here = piece.t_end - piece.t_begin, keys = last_tile_keys(piece);
    auto is_ragged_last = [&](int t) { return t == tiles_here - 1 && keys < kBlockN; };
    const QDescriptors<kBlockM> q_desc(q_buffer(i), consumer);
    for (int t = 0; t + 1 < tiles_here; ++t) {
      open_tile(g0 + t, t > 0, false, keys);
      MbarrierWait(SharedAddress(&k_full[stage_of(g0 + t + 1)]), parity_of(g0 + t + 1));
      take_turn();
      WgmmaFence();
      issue_qk(q_desc, g0 + t + 1);
      WgmmaCommit();
      issue_pv(g0 + t);
      WgmmaCommit();
      pass_turn();
      WgmmaWait<1>();  // S of tile t + 1; P V of tile t may still run
      PinRegisters(s);
      softmax(is_ragged_last(t + 1), keys);
    }
    open_tile(g0 + tiles_here - 1, tiles_here > 1, is_ragged_last(tiles_here - 1), keys);
    return tiles_here;
  };
  // Once piece i's last P V (of tile g_last) is done: its O merged with the previous block's part
  // of the unit (kMayTakeOver), handed over or written out, its Q buffer given back.
  auto write_out = [&](auto may_take_over, int i, int g_last, const float(&done_max)[2],
                       const float(&done_sum)[2]) {
    constexpr bool kMayTakeOver = decltype(may_take_over)::value;
    WgmmaWait<0>();
    PinRegisters(o);
    release(v_empty, g_last);
    constexpr int kVectors = kHandOverVectors<kHeadDim>;
    float out_max[2] = {done_max[0], done_max[1]}, out_sum[2] = {done_sum[0], done_sum[1]};
    // Worked out again here rather than held in registers across every tile: from i through a
    // warp reduction, which the compiler does not see through and ptxas knows to be
    // warp-uniform.
    StreamKPiece piece;
    PieceAt(work, *share, __reduce_max_sync(0xffffffffu, i), piece);
    const PersistentUnit unit = unit_at(piece.unit);
    if (piece.hands_over || (kMayTakeOver && piece.takes_over)) {
      // A cut unit: its first tiles' block (this one, or blockIdx.x - 1 for the unit's last
      // tiles, whose block finishes it) hands over O unnormalised with its row maxima and sums
      // in its slot, each warp's part flagged once written.
      const int consumer_thread = Opaque(threadIdx.x) - kProducerThreads;
      const int slot_block = blockIdx.x - (piece.hands_over ? 0 : 1);
      float4* const slot =
          work.partials + static_cast<int64_t>(slot_block) * kVectors * kConsumerThreads +
          consumer_thread;
      uint32_t* const ready = work.ready + slot_block * kConsumerWarps + consumer_thread / 32;
      if (piece.hands_over) {
#pragma unroll
        for (int v = 0; v < kVectors - 1; ++v) {
          __stcg(slot + v * kConsumerThreads,
                 float4{o[4 * v], o[4 * v + 1], o[4 * v + 2], o[4 * v + 3]});
        }
        __stcg(slot + (kVectors - 1) * kConsumerThreads,
               float4{out_max[0], out_max[1], out_sum[0], out_sum[1]});
        __threadfence();
        __syncwarp();
        if (lane == 0) StoreReleaseGpu(ready, 1);
      } else if constexpr (kMayTakeOver) {
        // The unit's first tiles were block blockIdx.x - 1's first work: its partial is there
        // or nearly so. Every lane reads the flag (one request for the warp), so the loop is
        // the warp's as a whole.
        while (!__all_sync(0xffffffffu, LoadAcquireGpu(ready) != 0)) {
        }
        MergePartial<kHeadDim>(o, out_max, out_sum,
                               __ldcg(slot + (kVectors - 1) * kConsumerThreads),
                               [&](int e) { return __ldcg(slot + (e / 4) * kConsumerThreads); });
        __syncwarp();
        if (lane == 0) *ready = 0;  // for the next launch (or graph replay)
      }
    }
    // Run by every piece, a handing-over one with no rows to write: around the named barrier
    // inside, a branch on the piece cost the next piece's wgmma descriptors their uniform
    // registers (73 R2UR in the kernel instead of 32).
    const int q_start = p.q_indptr[unit.seq];
    const int q_len = piece.hands_over ? 0 : p.q_indptr[unit.seq + 1] - q_start;
    WriteOutputRowsByTma<T, kHeadDim, kBlockM>(
        o, out_max, out_sum, q_buffer(i),
        {.consumer = consumer, .warp_row0 = warp_row0, .group = group, .quad_lane = quad_lane,
         .q_tile_start = unit.q_tile_start, .q_len = q_len, .q_start = q_start,
         .qo_head = unit.qo_head, .o = p.o, .lse = p.lse, .num_qo_heads = p.num_qo_heads},
        qo.o, unit.seq == work.last_sequence);
    GiveQBufferBack(&q_empty[i & 1]);
  };
  // Piece i's first S = Q K^T (tile g) issued in a turn with whatever `issue_after` issues (the
  // previous piece's last P V, or nothing).
  auto first_tile = [&](int i, int g, auto&& issue_after) {
    MbarrierWait(SharedAddress(&q_full[i & 1]), (i >> 1) & 1);
    MbarrierWait(SharedAddress(&k_full[stage_of(g)]), parity_of(g));
    take_turn();
    WgmmaFence();
    issue_qk(QDescriptors<kBlockM>(q_buffer(i), consumer), g);
    WgmmaCommit();
    issue_after();
    pass_turn();
  };

  // Every piece but the block's last (which takes over where its unit was cut, and only it: a
  // block's range is at least a unit long and walked from the top down) ends with the next
  // piece's first S. (No branch on the piece around the wgmmas: one made ptxas serialise every
  // wgmma of the kernel.)
  const int block_pieces = __reduce_max_sync(0xffffffffu, share->pieces);
  first_tile(0, 0, [] {});
  WgmmaWait<0>();
  PinRegisters(s);
  {
    StreamKPiece piece;
    PieceAt(work, *share, 0, piece);
    const int keys = last_tile_keys(piece);
    softmax(piece.t_end - piece.t_begin == 1 && keys < kBlockN, keys);
  }
  int i = 0, g0 = 0;
  for (; i + 1 < block_pieces; ++i) {
    const int g_next = g0 + run_tiles_but_last(i, g0);
    first_tile(i + 1, g_next, [&] {
      issue_pv(g_next - 1);
      WgmmaCommit();
    });
    float done_max[2], done_sum[2];
    sm90::RestartRows(row_max, row_sum, done_max, done_sum);
    WgmmaWait<1>();
    PinRegisters(s);
    {
      StreamKPiece next;
      PieceAt(work, *share, i + 1, next);
      const int keys = last_tile_keys(next);
      softmax(next.t_end - next.t_begin == 1 && keys < kBlockN, keys);
    }
    write_out(std::false_type{}, i, g_next - 1, done_max, done_sum);
#pragma unroll
    for (int e = 0; e < kHeadDim / 2; ++e) o[e] = 0.0f;
    g0 = g_next;
  }
  // The block's last piece ends as the plain kernel's does.
  const int g_last = g0 + run_tiles_but_last(i, g0) - 1;
  take_turn();
  WgmmaFence();
  issue_pv(g_last);
  WgmmaCommit();
  pass_turn();
  write_out(std::true_type{}, i, g_last, row_max, row_sum);
  if (consumer == 0) take_turn();
#else
  __trap();
#endif
}

// A tensor map over one KV cache, (head_dim, KV head, slot), for boxes of 64 x 1 x kBoxRows. False
// where TMA cannot read it: the launcher then takes the cp.async kernel.
template <typename T>
bool EncodeKvTensorMap(const void* cache, const AttentionProblem& problem, CUtensorMap& map) {
  static_assert(kSlab == 64, "the maps' boxes are 64 columns wide");
  const AttentionShape& shape = problem.shape;
  return sm90::EncodeHeadRowsTensorMap<T>(
      cache, shape.head_dim, shape.num_kv_heads,
      static_cast<int64_t>(problem.buffers.num_pages) * shape.page_size,
      static_cast<int64_t>(shape.num_kv_heads) * shape.head_dim, kBoxRows,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, map);
}

// The persistent grids' Q (boxes of a unit's kBlockM rows) and O (16 rows: a consumer warp's).
template <typename T, int kHeadDim, int kBlockM>
bool EncodeQoTensorMaps(const AttentionProblem& problem, const PrefillKernelParams& params,
                        QoTensorMaps& maps) {
  const int64_t tokens = problem.lengths.total_q();
  return sm90::EncodeHeadRowsTensorMap<T>(params.q, kHeadDim, params.num_qo_heads, tokens,
                                          params.q_row_stride, kBlockM,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, maps.q) &&
         sm90::EncodeHeadRowsTensorMap<T>(params.o, kHeadDim, params.num_qo_heads, tokens,
                                          int64_t{params.num_qo_heads} * kHeadDim, 16,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, maps.o);
}

// A launch in thread block clusters (the split and multicast grids): `config` points at
// `cluster`, so the two stay together and are not copied.
struct ClusterLaunch {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute cluster{};
};
template <int kHeadDim>
void ConfigureClusterLaunch(const dim3& grid, const dim3& cluster_dims, int shared_bytes,
                            cudaStream_t stream, ClusterLaunch& launch) {
  launch.config.gridDim = grid;
  launch.config.blockDim = dim3(kThreadsFor<kHeadDim>);
  launch.config.dynamicSmemBytes = shared_bytes;
  launch.config.stream = stream;
  launch.cluster.id = cudaLaunchAttributeClusterDimension;
  launch.cluster.val.clusterDim.x = cluster_dims.x;
  launch.cluster.val.clusterDim.y = cluster_dims.y;
  launch.cluster.val.clusterDim.z = cluster_dims.z;
  launch.config.attrs = &launch.cluster;
  launch.config.numAttrs = 1;
}
// The split launch's configuration: `tiles` clusters of two blocks.
template <int kHeadDim>
void ConfigureSplitLaunch(int tiles, cudaStream_t stream, ClusterLaunch& launch) {
  ConfigureClusterLaunch<kHeadDim>(dim3(2 * tiles), dim3(2, 1, 1), SplitSharedBytes<kHeadDim>(),
                                   stream, launch);
}

// kMulticastKv: in clusters of two blocks along the query tiles (grid x with tiles_fastest, else
// y), whose count the caller keeps even.
template <typename T, int kHeadDim, bool kCausal, bool kTmaKv, bool kMulticastKv = false>
absl::Status LaunchKernel(const dim3& grid, const PrefillKernelParams& params,
                          const KvTensorMaps& maps, cudaStream_t stream) {
  constexpr int kShared = SharedBytes<kHeadDim>();
  auto* kernel = PrefillSm90Kernel<T, kHeadDim, kCausal, kTmaKv, false, kMulticastKv>;
  CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
  if constexpr (kMulticastKv) {
    ClusterLaunch launch;
    ConfigureClusterLaunch<kHeadDim>(
        grid, params.tiles_fastest ? dim3(2, 1, 1) : dim3(1, 2, 1), kShared, stream, launch);
    CUDA_RETURN_IF_ERROR(cudaLaunchKernelEx(&launch.config, kernel, params, maps));
  } else {
    kernel<<<grid, kThreadsFor<kHeadDim>, kShared, stream>>>(params, maps);
  }
  CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

// The stream-K hand-over's workspace: a slot of partial results a block (HandOverSlotBytes), then
// a ready flag a consumer warp of each block.
template <int kHeadDim>
constexpr size_t HandOverSlotBytes() {
  return size_t{16} * kHandOverVectors<kHeadDim> * kConsumerThreadsFor<kHeadDim>;
}
template <int kHeadDim>
constexpr size_t HandOverWorkspaceBytes() {
  return kMaxPersistentBlocks *
         (HandOverSlotBytes<kHeadDim>() + 4 * 4 * kConsumerGroupsFor<kHeadDim>);
}

// BalanceStreamKRanges for a launch, worked out once a shape (a bisection of greedy fills:
// 0.1-0.25 ms, against launches of tens of microseconds). The shapes are few: under two rounds
// of units of at most kStreamKMaxKvTiles on at most kMaxPersistentBlocks blocks.
const std::vector<int>& StreamKRangesFor(int tiles, int unit_tiles, int blocks) {
  static absl::Mutex mutex(absl::kConstInit);
  static auto* const plans = new std::map<std::tuple<int, int, int>, std::vector<int>>();
  absl::MutexLock lock(&mutex);
  std::vector<int>& plan = (*plans)[{tiles, unit_tiles, blocks}];
  if (plan.empty()) plan = BalanceStreamKRanges(tiles, unit_tiles, blocks, kStreamKPieceCosts);
  return plan;
}

// The persistent grid's work: its last two rounds of units dealt out by KV tiles where the units
// do not fill whole rounds and `workspace` holds the hand-over, else whole units throughout.
template <int kHeadDim>
StreamKUnits PlanStreamKUnits(int blocks, int units, int q_tiles, int kv_len, int sequences,
                              const PrefillWorkspace& workspace) {
  const int kv_tiles = KvTilesFor<kHeadDim>(kv_len);
  StreamKUnits work{.units = units,
                    .q_tiles = q_tiles,
                    .num_kv_tiles = kv_tiles,
                    .kv_len = kv_len,
                    .last_sequence = sequences - 1,
                    .whole_units = units,
                    .partials = nullptr,
                    .ready = nullptr};
  const int idle_blocks = units % blocks == 0 ? 0 : blocks - units % blocks;
  if (workspace.data != nullptr && workspace.bytes >= HandOverWorkspaceBytes<kHeadDim>() &&
      idle_blocks * kv_tiles >= kStreamKMinIdleTiles * blocks) {
    work.whole_units = (units / blocks - 1) * blocks;
    const std::vector<int>& bounds =
        StreamKRangesFor((units - work.whole_units) * kv_tiles, kv_tiles, blocks);
    std::copy(bounds.begin(), bounds.end(), work.bounds);
    work.partials = static_cast<float4*>(workspace.data);
    work.ready = reinterpret_cast<uint32_t*>(static_cast<char*>(workspace.data) +
                                             kMaxPersistentBlocks * HandOverSlotBytes<kHeadDim>());
  }
  return work;
}

// The persistent grid: `blocks` blocks (one an SM) over `work`'s units.
template <typename T, int kHeadDim>
absl::Status LaunchPersistentKernel(int blocks, const PrefillKernelParams& params,
                                    const KvTensorMaps& maps, const QoTensorMaps& qo,
                                    const PersistentUnits& work, cudaStream_t stream) {
  constexpr int kShared = WholeUnitSharedBytes<kHeadDim>();
  auto* kernel = PrefillSm90PersistentKernel<T, kHeadDim>;
  CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
  kernel<<<blocks, ThreadsWith(kWholeUnitGroups), kShared, stream>>>(params, maps, qo, work);
  CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

// The stream-K grid: `blocks` blocks (one an SM) over `work`'s pieces.
template <typename T, int kHeadDim>
absl::Status LaunchStreamKKernel(int blocks, const PrefillKernelParams& params,
                                 const KvTensorMaps& maps, const QoTensorMaps& qo,
                                 const StreamKUnits& work, cudaStream_t stream) {
  constexpr int kShared = StreamKSharedBytes<kHeadDim>();
  auto* kernel = PrefillSm90StreamKKernel<T, kHeadDim>;
  CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
  kernel<<<blocks, kThreadsFor<kHeadDim>, kShared, stream>>>(params, maps, qo, work);
  CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

// How many tiles of a short last wave to split (0: none). Only where it pays by the wave
// arithmetic: more than one wave, the last one at most half full (its tiles become two blocks
// each and still fit one wave), a uniform batch (every tile holds rows) of at least two KV tiles,
// and room on the GPU for all those clusters at once.
bool UniformLengths(const SequenceLengths& lengths) {
  return std::adjacent_find(lengths.q_lens.begin(), lengths.q_lens.end(),
                            std::not_equal_to<>()) == lengths.q_lens.end() &&
         std::adjacent_find(lengths.kv_lens.begin(), lengths.kv_lens.end(),
                            std::not_equal_to<>()) == lengths.kv_lens.end();
}

absl::StatusOr<int> MultiprocessorCount() {
  int device = 0, sms = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

template <typename T, int kHeadDim>
absl::StatusOr<int> ShortLastWaveTiles(const AttentionProblem& problem, int64_t blocks) {
  const SequenceLengths& lengths = problem.lengths;
  if (!UniformLengths(lengths) || lengths.max_kv_len() <= kBlockNFor<kHeadDim>) return 0;
  ASSIGN_OR_RETURN(const int sms, MultiprocessorCount());
  const int64_t tail = blocks % sms;
  if (blocks <= sms || tail == 0 || 2 * tail > sms) return 0;
  auto* kernel = PrefillSm90Kernel<T, kHeadDim, false, true, true>;
  CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            SplitSharedBytes<kHeadDim>()));
  ClusterLaunch launch;
  ConfigureSplitLaunch<kHeadDim>(static_cast<int>(tail), nullptr, launch);
  int clusters = 0;
  CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveClusters(&clusters, kernel, &launch.config));
  return clusters >= tail ? static_cast<int>(tail) : 0;
}

template <typename T, int kHeadDim>
absl::Status LaunchSplitTiles(const PrefillKernelParams& params, const KvTensorMaps& maps,
                              int tiles, cudaStream_t stream) {
  ClusterLaunch launch;
  ConfigureSplitLaunch<kHeadDim>(tiles, stream, launch);
  CUDA_RETURN_IF_ERROR(cudaLaunchKernelEx(&launch.config,
                                          PrefillSm90Kernel<T, kHeadDim, false, true, true>,
                                          params, maps));
  return absl::OkStatus();
}

// A persistent grid's blocks, one an SM (0: the plain grid runs): by TMA without a causal mask,
// a uniform batch, more units (of kBlockM query rows) than SMs, and Q readable by TMA in boxes of
// kBlockM rows.
template <typename T, int kHeadDim, int kBlockM>
absl::StatusOr<int> PersistentBlocks(const AttentionProblem& problem,
                                     const PrefillKernelParams& params, int64_t units,
                                     QoTensorMaps& qo) {
  if (problem.shape.causal || !UniformLengths(problem.lengths)) return 0;
  ASSIGN_OR_RETURN(const int sms, MultiprocessorCount());
  if (units <= sms || sms > kMaxPersistentBlocks ||
      !EncodeQoTensorMaps<T, kHeadDim, kBlockM>(problem, params, qo)) {
    return 0;
  }
  return sms;
}

// The whole-unit persistent grid where it runs (else nullopt): KV tiles that fill its stages
// evenly, at most kWholeUnitMaxKvTilesFor, and a plain grid (`plain_blocks`) of more than one
// wave (at head_dim 64 a wave of the plain grid's three-consumer blocks is the faster: H200, 768
// tokens, 17.7 us against 25.5).
template <typename T, int kHeadDim>
absl::StatusOr<std::optional<PrefillLaunchInfo>> LaunchWholeUnitsIfFit(
    const AttentionProblem& problem, const PrefillKernelParams& params, const KvTensorMaps& maps,
    int64_t plain_blocks, cudaStream_t stream) {
  const SequenceLengths& lengths = problem.lengths;
  const int kv_tiles = KvTilesFor<kHeadDim>(lengths.max_kv_len());
  if (kv_tiles % kWholeUnitStages != 0 || kv_tiles > kWholeUnitMaxKvTilesFor<kHeadDim>) {
    return std::nullopt;
  }
  const int q_tiles = (lengths.max_q_len() + kWholeUnitBlockM - 1) / kWholeUnitBlockM;
  const int64_t units = int64_t{params.num_qo_heads} * q_tiles * lengths.batch();
  QoTensorMaps qo{};
  ASSIGN_OR_RETURN(const int blocks, (PersistentBlocks<T, kHeadDim, kWholeUnitBlockM>(
                                         problem, params, units, qo)));
  if (blocks == 0 || plain_blocks <= blocks) return std::nullopt;
  RETURN_IF_ERROR((LaunchPersistentKernel<T, kHeadDim>(
      blocks, params, maps, qo,
      {.units = static_cast<int>(units),
       .q_tiles = q_tiles,
       .num_kv_tiles = kv_tiles,
       .total_q = static_cast<int>(lengths.total_q())},
      stream)));
  return PrefillLaunchInfo{.block_m = kWholeUnitBlockM,
                           .block_n = kBlockNFor<kHeadDim>,
                           .warps = kWholeUnitGroups * 4,
                           .stages = kWholeUnitStages,
                           .shared_bytes = WholeUnitSharedBytes<kHeadDim>(),
                           .blocks = blocks,
                           .variant = PrefillVariant::kHopperWgmma,
                           .tma_kv = true,
                           .persistent = true};
}

template <typename T, int kHeadDim>
absl::StatusOr<PrefillLaunchInfo> LaunchTyped(const AttentionProblem& problem,
                                              const PrefillKernelParams& params,
                                              const PrefillWorkspace& workspace,
                                              cudaStream_t stream) {
  constexpr int kBlockM = kBlockMFor<kHeadDim>;
  const int q_tiles = (problem.lengths.max_q_len() + kBlockM - 1) / kBlockM;
  // Without a causal mask every tile of a head reads all of its KV head's K and V. Where those
  // of all KV heads outgrow half the L2, the blocks resident at once take the tiles of one head
  // (then the next) instead of one tile of every head, and read K and V from the L2 instead of
  // DRAM (kTilesFirstChosen). Causal grids keep heads fastest: their heavy tiles go first.
  PrefillKernelParams ordered = params;
  if constexpr (kTilesFirstChosen<kHeadDim>) {
    int device = 0, l2_bytes = 0;
    CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
    CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
    const int64_t kv_bytes = int64_t{2} * problem.lengths.max_kv_len() *
                             problem.shape.num_kv_heads * kHeadDim * sizeof(T);
    ordered.tiles_fastest = !problem.shape.causal && 2 * kv_bytes > l2_bytes;
  }
  const dim3 grid(ordered.tiles_fastest ? q_tiles : params.num_qo_heads,
                  ordered.tiles_fastest ? params.num_qo_heads : q_tiles, problem.lengths.batch());
  KvTensorMaps maps{};
  const bool tma = problem.shape.page_size % kBoxRows == 0 &&
                   EncodeKvTensorMap<T>(problem.buffers.k_cache, problem, maps.k) &&
                   EncodeKvTensorMap<T>(problem.buffers.v_cache, problem, maps.v);
  const bool causal = problem.shape.causal;
  // Pairs of query tiles share their K/V loads where the tiles pair up (an even count, as
  // FlashAttention-3 asks too; a pair's second tile may still be empty in a ragged batch).
  const bool multicast = kMulticastsKv<kHeadDim> && tma && !causal && q_tiles % 2 == 0;
  const int64_t units = static_cast<int64_t>(grid.x) * grid.y * grid.z;
  if constexpr (kPersistentFor<kHeadDim>) {
    if (tma && !causal) {
      ASSIGN_OR_RETURN(std::optional<PrefillLaunchInfo> info,
                       (LaunchWholeUnitsIfFit<T, kHeadDim>(problem, params, maps, units, stream)));
      if (info.has_value()) return *info;
    }
  }
  QoTensorMaps qo{};
  int persistent_blocks = 0;
  StreamKUnits work{};
  if constexpr (kStreamKFor<kHeadDim>) {
    if (tma && KvTilesFor<kHeadDim>(problem.lengths.max_kv_len()) <= kStreamKMaxKvTiles) {
      ASSIGN_OR_RETURN(persistent_blocks,
                       (PersistentBlocks<T, kHeadDim, kBlockM>(problem, params, units, qo)));
    }
  }
  int split_tiles = 0;
  if constexpr (kSplitsShortLastWave<kHeadDim>) {
    if (tma && !causal && persistent_blocks == 0) {
      ASSIGN_OR_RETURN(split_tiles, (ShortLastWaveTiles<T, kHeadDim>(
                                        problem, static_cast<int64_t>(grid.x) * grid.y * grid.z)));
      if (split_tiles > 0) {
        ordered.whole_tiles = static_cast<int>(grid.x * grid.y * grid.z) - split_tiles;
        ordered.split_q_tiles = static_cast<int>(grid.y);
      }
    }
  }
  if (tma && causal) {
    RETURN_IF_ERROR((LaunchKernel<T, kHeadDim, true, true>(grid, ordered, maps, stream)));
  } else if (multicast) {
    if constexpr (kMulticastsKv<kHeadDim>) {
      RETURN_IF_ERROR((LaunchKernel<T, kHeadDim, false, true, true>(grid, ordered, maps, stream)));
    }
  } else if (persistent_blocks > 0) {
    if constexpr (kStreamKFor<kHeadDim>) {
      work = PlanStreamKUnits<kHeadDim>(persistent_blocks, static_cast<int>(units), q_tiles,
                                        problem.lengths.max_kv_len(), problem.lengths.batch(),
                                        workspace);
      RETURN_IF_ERROR((LaunchStreamKKernel<T, kHeadDim>(persistent_blocks, ordered, maps, qo,
                                                        work, stream)));
    }
  } else if (tma) {
    RETURN_IF_ERROR((LaunchKernel<T, kHeadDim, false, true>(grid, ordered, maps, stream)));
    if constexpr (kSplitsShortLastWave<kHeadDim>) {
      if (split_tiles > 0) {
        RETURN_IF_ERROR((LaunchSplitTiles<T, kHeadDim>(ordered, maps, split_tiles, stream)));
      }
    }
  } else if (causal) {
    RETURN_IF_ERROR((LaunchKernel<T, kHeadDim, true, false>(grid, ordered, maps, stream)));
  } else {
    RETURN_IF_ERROR((LaunchKernel<T, kHeadDim, false, false>(grid, ordered, maps, stream)));
  }
  return PrefillLaunchInfo{.block_m = kBlockM,
                           .block_n = kBlockNFor<kHeadDim>,
                           .warps = kConsumerThreadsFor<kHeadDim> / 32,
                           .stages = kStagesFor<kHeadDim>,
                           .shared_bytes = persistent_blocks > 0 ? StreamKSharedBytes<kHeadDim>()
                                                                 : SharedBytes<kHeadDim>(),
                           .blocks = persistent_blocks > 0 ? persistent_blocks : units,
                           .variant = PrefillVariant::kHopperWgmma,
                           .tma_kv = tma,
                           .tiles_first = ordered.tiles_fastest,
                           .split_tiles = split_tiles,
                           .multicast_kv = multicast,
                           .persistent = persistent_blocks > 0,
                           .stream_k_units = work.units - work.whole_units};
}

template <typename T>
absl::StatusOr<PrefillLaunchInfo> LaunchForType(const AttentionProblem& problem,
                                                const PrefillKernelParams& params,
                                                const PrefillWorkspace& workspace,
                                                cudaStream_t stream) {
  return DispatchHeadDim(problem.shape.head_dim, "Hopper prefill kernel", [&](auto head_dim) {
    return LaunchTyped<T, decltype(head_dim)::value>(problem, params, workspace, stream);
  });
}

}  // namespace

bool CurrentDeviceIsSm90() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    return false;
  }
  return major == 9 && minor == 0;
}

size_t PrefillWorkspaceFlagsOffset(int head_dim) {
  return head_dim == 64 ? kMaxPersistentBlocks * HandOverSlotBytes<64>() : 0;
}

size_t PrefillWorkspaceBytes(int head_dim) {
  return head_dim == 64 ? HandOverWorkspaceBytes<64>() : 0;  // the stream-K grid's only
}

absl::StatusOr<PrefillLaunchInfo> LaunchPrefillSm90(const AttentionProblem& problem,
                                                    const PrefillKernelParams& params,
                                                    const PrefillWorkspace& workspace,
                                                    cudaStream_t stream) {
  switch (problem.shape.dtype) {
    case AttentionDtype::kBf16:
      return LaunchForType<__nv_bfloat16>(problem, params, workspace, stream);
    case AttentionDtype::kFp16:
      return LaunchForType<__half>(problem, params, workspace, stream);
  }
  return absl::InvalidArgumentError("dtype has no Hopper prefill kernel");
}

}  // namespace gpuprof::attention
