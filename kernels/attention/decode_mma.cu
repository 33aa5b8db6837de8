// Paged decode on tensor cores (mma.sync m16n8k16, sm_80+), split along the KV length.
//
// One block of kWarps warps per (split, KV head, sequence). Each warp takes every kWarps-th
// tile of kTileKeys keys (32 in the long-tile kernel), gathers it through the page table with cp.async into its own
// shared-memory stages (a warp reads only what its own lanes copied, so it waits on nothing but
// __syncwarp), computes scores and P V on tensor cores with its own online softmax, and the
// warps' results are merged in shared memory at the end. Each warp-wide copy takes whole rows
// (2 keys x 256 bytes at head_dim 128), so L2 sees full 128-byte lines, not one 32-byte sector
// of 16 rows (that pattern held the kernel at ~80% of copy on an H200). Tiles are stored as
// the prefill stores them (16-byte chunk index XOR row % 8) so ldmatrix reads them without
// bank conflicts.
//
// Two kernels, by which side of the m16n8k16 tile the query rows take:
// - MmaDecodeKernel (head_dim 64, 128): the block's query rows (the group's query heads x draft
//   tokens, padded to 16) are the tile's 16 rows, held as A fragments for the whole split;
//   S = Q K^T, O += P V.
// - MmaDecodeTransposedKernel (head_dim 256): the rows (up to 8) are the tile's 8 columns and
//   the keys its 16 rows: S^T = K Q^T, O^T += V^T P^T. O^T of 256 x 8 is 64 registers a thread
//   where 16 x 256 would be 128 (with Q's 64, more than a thread has), and no mma computes
//   padding rows at groups up to 8. P^T's B fragments are S^T's accumulators transposed in
//   registers (movmatrix). At head_dim 64 the same kernel with 32-key tiles in two stages is the
//   long-tile candidate the decode tuner times (8 KiB of K and V a stage, as 16 keys are at
//   head_dim 128; a 16-key tile there leaves each tile's fixed work on half the bytes).
// Each has a twin with its tiles' K and V loaded by TMA (MmaDecodeTmaKernel,
// MmaDecodeTransposedTmaKernel: sm_90, pages of a multiple of 16 rows, 16-key tiles;
// WarpTmaTileLoader), a candidate the decode tuner times beside it.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "gpu/device_facts.h"
#include "kernels/attention/attention_device.cuh"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/decode_kernel_params.h"
#include "kernels/attention/decode_mma.h"
#include "kernels/attention/hopper_async.cuh"

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

inline constexpr int kTransposedRows = kTransposedTensorCoreRows;
static_assert(kTransposedRows == 8, "the rows are the n8 side of the mma tile");

inline constexpr int kThreads = kMmaDecodeThreads;
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kTileKeys = 16;  // one k16 step of P V
inline constexpr int kStages = 3;  // cp.async stages a warp
// The long-tile kernel's: two stages of 32 keys (64 KiB a block at head_dim 64, 3 blocks an SM).
inline constexpr int kLongTileStages = 2;

// A row of the warps' merge in shared memory. MmaDecodeKernel's rows are padded by 8 floats, so
// that the 8 rows a warp writes at once (as float2) fall in different banks; the transposed
// kernel's by 4, so that its lanes' single floats (rows 2 x lane % 4, columns lane / 4) do.
template <int kHeadDim>
constexpr int MergeRowStride() {
  return kHeadDim + 8;
}
template <int kHeadDim>
constexpr int TransposedMergeRowStride() {
  return kHeadDim + 4;
}

// The stages; the merge reuses them ([kWarps][rows][stride] floats, each row's max, sum and
// weight a warp, and each row's LSE).
template <int kHeadDim, int kRows, int kStride, int kStageCount, int kTile = kTileKeys>
constexpr int SharedBytes() {
  constexpr int stages = kWarps * kStageCount * 2 * kTile * kHeadDim * 2;
  constexpr int merge = (kWarps * kRows * (kStride + 3) + kRows) * 4;
  return stages > merge ? stages : merge;
}

// What one warp of block (split, KV head x row chunk, sequence) works on.
struct WarpWork {
  int seq, split;                  // from blockIdx.z and .x, or split-major (halving splits)
  int q_start, q_len, rows_total;  // the sequence's query tokens; rows = tokens x group
  int kv_head;
  int row0, rows;                  // the block's rows: row0.. of the KV head's, `rows` of them
  int kv_len, kv_begin, kv_end;    // the sequence's keys and the split's
  int my_tiles;                    // this warp's tiles: every kWarps-th of the split's
};

// kRowsPerChunk > 0: the KV head's rows come in chunks of that many, p.row_chunks blocks a
// KV head along blockIdx.y; 0: one block holds them all. kTileAlignedSplits: each split starts
// at a multiple of kTile keys (so a tile never straddles a page of a multiple of kTile rows);
// halving splits always do.
template <int kTile = kTileKeys, int kRowsPerChunk = 0, bool kTileAlignedSplits = false>
__device__ __forceinline__ WarpWork WorkOf(const DecodeKernelParams& p, int warp) {
  WarpWork w;
  int y = blockIdx.y;
  if (p.halving_splits) {
    // Split-major: the blocks of the large first splits are dispatched first.
    const int blocks_a_split = gridDim.y * gridDim.z;
    const int linear = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    w.split = linear / blocks_a_split;
    y = linear % blocks_a_split % gridDim.y;
    w.seq = linear % blocks_a_split / gridDim.y;
  } else {
    w.split = blockIdx.x;
    w.seq = blockIdx.z;
  }
  w.q_start = p.q_indptr[w.seq];
  w.q_len = p.q_indptr[w.seq + 1] - w.q_start;
  w.rows_total = w.q_len * p.group_size;
  if constexpr (kRowsPerChunk > 0) {
    w.kv_head = y / p.row_chunks;
    w.row0 = (y % p.row_chunks) * kRowsPerChunk;
    w.rows = max(0, min(kRowsPerChunk, w.rows_total - w.row0));
  } else {
    w.kv_head = y;
    w.row0 = 0;
    w.rows = w.rows_total;
  }
  w.kv_len = p.kv_lens[w.seq];
  if (p.halving_splits) {
    w.kv_begin = HalvingSplitBegin(w.kv_len, w.split, p.num_splits, kTile);
    w.kv_end = HalvingSplitBegin(w.kv_len, w.split + 1, p.num_splits, kTile);
  } else {
    int chunk_len = (w.kv_len + p.num_splits - 1) / p.num_splits;
    if constexpr (kTileAlignedSplits) chunk_len = (chunk_len + kTile - 1) / kTile * kTile;
    w.kv_begin = min(w.kv_len, w.split * chunk_len);
    w.kv_end = min(w.kv_len, w.kv_begin + chunk_len);
  }
  const int num_tiles = (w.kv_end - w.kv_begin + kTile - 1) / kTile;
  w.my_tiles = warp < num_tiles ? (num_tiles - warp + kWarps - 1) / kWarps : 0;
  return w;
}

// A warp's tiles, loaded through the page table into its stages. Lane l reads the page entry
// of key l % kTile one tile before the tile's copies are issued (so the dependent read is
// not on the copies' path); copy c of a tile then takes keys c * kKeysPerCopy.. whole, lane l
// chunk l % kChunks of key l / kChunks, its page entry shuffled from the lane that read it.
template <typename T, int kHeadDim, int kTile = kTileKeys>
struct WarpTileLoader {
  using Element = T;
  static constexpr bool kByTma = false;
  static constexpr int kDim = kHeadDim;
  static constexpr int kChunks = kHeadDim / 8;
  static constexpr int kKeysPerCopy = 32 / kChunks;
  static constexpr int kCopies = kTile / kKeysPerCopy;
  static constexpr int kTileElements = kTile * kHeadDim;
  static_assert(kKeysPerCopy * kChunks == 32 && kCopies * kKeysPerCopy == kTile);
  static_assert(kTile <= 32, "a lane reads one key's page entry");

  const DecodeKernelParams& p;
  const int32_t* pages;
  const T* k_base;
  const T* v_base;
  T* warp_tiles;  // [stage][K, V][kTile][kHeadDim]
  int kv_begin, kv_end, warp, lane;

  __device__ __forceinline__ int FirstKey(int tile) const {
    return kv_begin + (warp + kWarps * tile) * kTile;
  }
  __device__ __forceinline__ int ReadPage(int tile) const {
    const int j = FirstKey(tile) + lane % kTile;
    return j < kv_end ? __ldg(pages + (j >> p.log2_page_size)) : 0;
  }
  __device__ __forceinline__ const T* K(int stage) const {
    return warp_tiles + stage * 2 * kTileElements;
  }
  __device__ __forceinline__ const T* V(int stage) const { return K(stage) + kTileElements; }
  // Element offset of (key, 16-byte chunk) in a K or V tile.
  static __device__ __forceinline__ int Offset(int key, int chunk) {
    return SwizzledOffset<kHeadDim>(key, chunk);
  }
  __device__ __forceinline__ void Load(int tile, int stage, int page) const {
    T* ks = warp_tiles + stage * 2 * kTileElements;
    T* vs = ks + kTileElements;
    const int key0 = FirstKey(tile);
    const int chunk = lane % kChunks, copy_key = lane / kChunks;
#pragma unroll
    for (int c = 0; c < kCopies; ++c) {
      const int key = c * kKeysPerCopy + copy_key;
      const int key_page = __shfl_sync(0xffffffffu, page, key);
      const int j = key0 + key;
      const bool valid = j < kv_end;
      const int64_t src =
          valid ? PagedSlot(key_page, j, p.log2_page_size) * p.kv_row_stride + chunk * 8 : 0;
      const int dst = SwizzledOffset<kHeadDim>(key, chunk);
      CpAsync16(SharedAddress(ks + dst), k_base + src, valid);
      CpAsync16(SharedAddress(vs + dst), v_base + src, valid);
    }
  }
};

// The loader of this block's K and V tiles for warp `warp` (block: split, KV head, sequence).
template <typename Loader, int kStageCount>
__device__ __forceinline__ Loader WarpLoaderFor(const DecodeKernelParams& p, const WarpWork& w,
                                                uint4* shared_raw, int warp, int lane) {
  using T = typename Loader::Element;
  const int kv_head = w.kv_head;
  return Loader{.p = p,
                .pages = p.page_indices + p.page_indptr[w.seq],
                .k_base = static_cast<const T*>(p.k_cache) + kv_head * Loader::kDim,
                .v_base = static_cast<const T*>(p.v_cache) + kv_head * Loader::kDim,
                .warp_tiles = reinterpret_cast<T*>(shared_raw) +
                              warp * kStageCount * 2 * Loader::kTileElements,
                .kv_begin = w.kv_begin,
                .kv_end = w.kv_end,
                .warp = warp,
                .lane = lane};
}

// Issues the copies of a warp's first kStageCount - 1 tiles; returns the next tile's page entry.
template <int kStageCount, typename Loader>
__device__ __forceinline__ int StartTiles(const Loader& loader, int my_tiles) {
#pragma unroll
  for (int s = 0; s < kStageCount - 1; ++s) {
    if (s < my_tiles) loader.Load(s, s, loader.ReadPage(s));
    CpAsyncCommit();
  }
  return kStageCount - 1 < my_tiles ? loader.ReadPage(kStageCount - 1) : 0;
}

// Waits for tile i's rows, then issues tile i + kStageCount - 1's copies into the stage that
// tile i - 1 was read from (and reads the page entry of the tile after it); returns tile i's
// stage.
template <int kStageCount, typename Loader>
__device__ __forceinline__ int NextTile(const Loader& loader, int i, int my_tiles,
                                        int& next_page) {
  CpAsyncWait<kStageCount - 2>();  // this lane's copies of tile i
  __syncwarp();                    // and every lane's; the stage read last iteration is free
  if (i + kStageCount - 1 < my_tiles) {
    loader.Load(i + kStageCount - 1, (i + kStageCount - 1) % kStageCount, next_page);
    if (i + kStageCount < my_tiles) next_page = loader.ReadPage(i + kStageCount);
  }
  CpAsyncCommit();
  return i % kStageCount;
}

// The TMA path (sm_90, pages of a multiple of kTileKeys rows): a tile's K and V arrive as boxes
// of 64 columns x kTileKeys keys (one page's rows, aligned in its page; a 32-key tile is two
// such boxes, each through its own page entry) issued by one lane, completing on the warp's
// stage barrier, instead of as each lane's cp.async copies with their address arithmetic,
// which are a large part of the warp's issue slots per tile.
struct DecodeKvTensorMaps {
  CUtensorMap k;
  CUtensorMap v;
};
inline constexpr int kTmaBoxColumns = 64;     // one 128-byte swizzled row
inline constexpr int kTmaSharedAlign = 1024;  // the 128-byte swizzle repeats every 8 rows

// A warp's tiles by TMA: the same interface as WarpTileLoader, with the pipeline's start and
// step as members (stage barriers in place of cp.async groups). A tile is [slab][key][64]: slab
// s holds columns 64 s.., each 128-byte row's chunks XOR key % 8, as the TMA unit writes them.
template <typename T, int kHeadDim, int kStageCount, int kTile = kTileKeys>
struct WarpTmaTileLoader {
  using Element = T;
  static constexpr bool kByTma = true;
  static constexpr int kChunks = kHeadDim / 8;
  static constexpr int kSlabs = kHeadDim / kTmaBoxColumns;
  static constexpr int kBoxes = kTile / kTileKeys;  // page boxes a tile, each its own page entry
  static constexpr int kTileElements = kTile * kHeadDim;
  static constexpr uint32_t kTileBytes = 2 * kTileElements * sizeof(T);  // K and V
  static_assert(kHeadDim % kTmaBoxColumns == 0 && kTile % kTileKeys == 0 && kBoxes <= 32);

  const DecodeKernelParams& p;
  const DecodeKvTensorMaps& maps;
  const int32_t* pages;
  T* warp_tiles;          // [stage][K, V][kTile x kHeadDim], 1024-byte aligned
  uint32_t full_barrier;  // this warp's kStageCount stage barriers, 8 bytes apart
  int kv_head, kv_begin, kv_end, warp, lane;

  __device__ __forceinline__ int FirstKey(int tile) const {
    return kv_begin + (warp + kWarps * tile) * kTile;
  }
  // Lane b reads the page entry of the tile's box b (lane 0 issues the loads).
  __device__ __forceinline__ int ReadPage(int tile) const {
    const int j = FirstKey(tile) + (kBoxes == 1 ? 0 : lane * kTileKeys);
    return lane < kBoxes && j < kv_end ? __ldg(pages + (j >> p.log2_page_size)) : 0;
  }
  __device__ __forceinline__ const T* K(int stage) const {
    return warp_tiles + stage * 2 * kTileElements;
  }
  __device__ __forceinline__ const T* V(int stage) const { return K(stage) + kTileElements; }
  static __device__ __forceinline__ int Offset(int key, int chunk) {
    return (chunk / 8) * kTile * kTmaBoxColumns + key * kTmaBoxColumns +
           (((chunk % 8) ^ (key & 7)) << 3);
  }
  __device__ __forceinline__ uint32_t Barrier(int stage) const { return full_barrier + 8 * stage; }

  // A box past the split's end (page entry 0) loads rows that the masks and the V zeroing
  // leave out; the barrier counts every box's bytes.
  __device__ __forceinline__ void Load(int tile, int stage, int page) const {
#if __CUDA_ARCH__ >= 900
    int box_page[kBoxes];
#pragma unroll
    for (int b = 0; b < kBoxes; ++b) {
      box_page[b] = kBoxes == 1 ? page : __shfl_sync(0xffffffffu, page, b);
    }
    if (lane == 0) {
      const uint32_t barrier = Barrier(stage);
      sm90::MbarrierArriveExpectBytes(barrier, kTileBytes);
      const int page_mask = (1 << p.log2_page_size) - 1;
#pragma unroll
      for (int b = 0; b < kBoxes; ++b) {
        const int slot = (box_page[b] << p.log2_page_size) +
                         ((FirstKey(tile) + b * kTileKeys) & page_mask);
#pragma unroll
        for (int slab = 0; slab < kSlabs; ++slab) {
          const int offset = slab * kTile * kTmaBoxColumns + b * kTileKeys * kTmaBoxColumns;
          sm90::TmaLoad3d(SharedAddress(K(stage) + offset), maps.k, slab * kTmaBoxColumns,
                          kv_head, slot, barrier);
          sm90::TmaLoad3d(SharedAddress(V(stage) + offset), maps.v, slab * kTmaBoxColumns,
                          kv_head, slot, barrier);
        }
      }
    }
#endif
  }

  // Sets up the warp's stage barriers and issues its first kStageCount - 1 tiles; returns the
  // next tile's page entry.
  __device__ __forceinline__ int Start(int my_tiles) const {
#if __CUDA_ARCH__ >= 900
    if (lane == 0) {
#pragma unroll
      for (int s = 0; s < kStageCount; ++s) sm90::MbarrierInit(Barrier(s), 1);
      sm90::FenceMbarrierInitCluster();  // the inits, before the TMA unit completes on them
    }
    __syncwarp();
#pragma unroll
    for (int s = 0; s < kStageCount - 1; ++s) {
      if (s < my_tiles) Load(s, s, ReadPage(s));
    }
#endif
    return kStageCount - 1 < my_tiles ? ReadPage(kStageCount - 1) : 0;
  }

  // Waits for tile i, zeroes its V rows past the split's end (they hold whatever the page's
  // unused slots do, and a P of 0 times a NaN there would still be NaN), then issues tile
  // i + kStageCount - 1 into the stage tile i - 1 was read from; returns tile i's stage.
  __device__ __forceinline__ int Next(int i, int my_tiles, int& next_page) const {
    const int stage = i % kStageCount;
#if __CUDA_ARCH__ >= 900
    sm90::MbarrierWait(Barrier(stage), (i / kStageCount) & 1);
    const int valid = kv_end - FirstKey(i);
    if (valid < kTile) {
      T* vs = warp_tiles + stage * 2 * kTileElements + kTileElements;
      for (int idx = lane; idx < (kTile - valid) * kChunks; idx += 32) {
        *reinterpret_cast<uint4*>(vs + Offset(valid + idx / kChunks, idx % kChunks)) =
            make_uint4(0u, 0u, 0u, 0u);
      }
    }
    __syncwarp();  // every lane is past tile i - 1's reads, and sees the zeroed rows
    if (i + kStageCount - 1 < my_tiles) {
      Load(i + kStageCount - 1, (i + kStageCount - 1) % kStageCount, next_page);
      if (i + kStageCount < my_tiles) next_page = ReadPage(i + kStageCount);
    }
#endif
    return stage;
  }
};

// WarpLoaderFor, StartTiles and NextTile for the TMA loader. kSharedBytes: the kernel's stages
// or merge, whichever is larger (SharedBytes), after which the barriers lie.
template <typename Loader, int kStageCount, int kSharedBytes>
__device__ __forceinline__ Loader TmaWarpLoaderFor(const DecodeKernelParams& p, const WarpWork& w,
                                                   const DecodeKvTensorMaps& maps,
                                                   uint4* shared_raw, int warp, int lane) {
  using T = typename Loader::Element;
  // The stages from the first 1024-byte boundary; the barriers past them and past the merge.
  const uint32_t raw = SharedAddress(shared_raw);
  T* tiles = reinterpret_cast<T*>(reinterpret_cast<char*>(shared_raw) +
                                  (((raw + kTmaSharedAlign - 1) & ~(kTmaSharedAlign - 1)) - raw));
  return Loader{.p = p,
                .maps = maps,
                .pages = p.page_indices + p.page_indptr[w.seq],
                .warp_tiles = tiles + warp * kStageCount * 2 * Loader::kTileElements,
                .full_barrier = raw + kTmaSharedAlign + kSharedBytes + warp * kStageCount * 8,
                .kv_head = w.kv_head,
                .kv_begin = w.kv_begin,
                .kv_end = w.kv_end,
                .warp = warp,
                .lane = lane};
}
// A warp's loader, either kind (`maps`: the TMA loader's; null for cp.async).
template <typename Loader, int kStageCount, int kSharedBytes>
__device__ __forceinline__ Loader LoaderFor(const DecodeKernelParams& p, const WarpWork& w,
                                            const DecodeKvTensorMaps* maps, uint4* shared_raw,
                                            int warp, int lane) {
  if constexpr (Loader::kByTma) {
    return TmaWarpLoaderFor<Loader, kStageCount, kSharedBytes>(p, w, *maps, shared_raw, warp,
                                                               lane);
  } else {
    return WarpLoaderFor<Loader, kStageCount>(p, w, shared_raw, warp, lane);
  }
}
// Dynamic shared memory of a TMA kernel whose stages or merge take kSharedBytes: room to align
// the stages, then each warp's stage barriers.
template <int kSharedBytes, int kStageCount>
constexpr int TmaSharedBytes() {
  static_assert(kSharedBytes % 8 == 0, "the barriers are 8-byte aligned");
  return kTmaSharedAlign + kSharedBytes + kWarps * kStageCount * 8;
}
template <int kStageCount, typename T, int kHeadDim, int kTile>
__device__ __forceinline__ int StartTiles(
    const WarpTmaTileLoader<T, kHeadDim, kStageCount, kTile>& loader, int my_tiles) {
  return loader.Start(my_tiles);
}
template <int kStageCount, typename T, int kHeadDim, int kTile>
__device__ __forceinline__ int NextTile(
    const WarpTmaTileLoader<T, kHeadDim, kStageCount, kTile>& loader, int i, int my_tiles,
    int& next_page) {
  return loader.Next(i, my_tiles, next_page);
}

// The merge's shared memory, over the stages: [warp][row][kStride] floats of O, each row's max
// and sum (base 2, over the warp's keys) and normalised weight a warp, and each row's LSE.
template <int kRows, int kStride>
struct MergeBuffers {
  float* o;       // [warp][row][kStride]
  float* max;     // [warp][row]
  float* sum;     // [warp][row]
  float* weight;  // [warp][row], over the row's sum
  float* lse;     // [row], base 2
  __device__ __forceinline__ explicit MergeBuffers(uint4* shared_raw)
      : o(reinterpret_cast<float*>(shared_raw)),
        max(o + kWarps * kRows * kStride),
        sum(max + kWarps * kRows),
        weight(sum + kWarps * kRows),
        lse(weight + kWarps * kRows) {}
};

// The warps' merge, once each warp has written its rows' max and sum (base-2, over its keys)
// and its unnormalised O rows to shared memory and the block has synchronised: weight each warp
// by 2^(its max - the largest max). kRows threads first give each row its warps' normalised
// weights and its LSE; then a thread merges 8 columns of a row with 16-byte loads and one
// 16-byte store (a loop over single elements, each redoing the row's weights, cost about 1 us a
// block at group 8, all of it after the last tile). Writes O (and the LSE) or, split, the
// partials for the merge kernel.
template <typename T, int kHeadDim, int kRows, int kStride>
__device__ __forceinline__ void MergeWarpsAndStore(const MergeBuffers<kRows, kStride>& merge,
                                                   const DecodeKernelParams& p,
                                                   const WarpWork& w) {
  const int split = w.split;
  if (threadIdx.x < kRows) {
    const int r = threadIdx.x;
    float m = -INFINITY;
#pragma unroll
    for (int warp = 0; warp < kWarps; ++warp) m = fmaxf(m, merge.max[warp * kRows + r]);
    float weight[kWarps];
    float sum = 0.0f;
#pragma unroll
    for (int warp = 0; warp < kWarps; ++warp) {
      weight[warp] = m == -INFINITY ? 0.0f : FastExp2(merge.max[warp * kRows + r] - m);
      sum += weight[warp] * merge.sum[warp * kRows + r];
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
    for (int warp = 0; warp < kWarps; ++warp) {
      merge.weight[warp * kRows + r] = weight[warp] * inv;
    }
    merge.lse[r] = sum > 0.0f ? m + __log2f(sum) : -INFINITY;
  }
  __syncthreads();
  constexpr int kSlices = kHeadDim / 8;
  for (int idx = threadIdx.x; idx < w.rows * kSlices; idx += kThreads) {
    const int r = idx / kSlices, col = (idx % kSlices) * 8;
    float value[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int warp = 0; warp < kWarps; ++warp) {
      const float weight = merge.weight[warp * kRows + r];
      const float4* part =
          reinterpret_cast<const float4*>(merge.o + (warp * kRows + r) * kStride + col);
      const float4 lo = part[0], hi = part[1];
      value[0] = fmaf(weight, lo.x, value[0]);
      value[1] = fmaf(weight, lo.y, value[1]);
      value[2] = fmaf(weight, lo.z, value[2]);
      value[3] = fmaf(weight, lo.w, value[3]);
      value[4] = fmaf(weight, hi.x, value[4]);
      value[5] = fmaf(weight, hi.y, value[5]);
      value[6] = fmaf(weight, hi.z, value[6]);
      value[7] = fmaf(weight, hi.w, value[7]);
    }
    const float lse2 = merge.lse[r];
    const int row = w.row0 + r;  // of the KV head's rows
    const int qi = row / p.group_size;
    const int head = w.kv_head * p.group_size + row % p.group_size;
    const int64_t token_head = static_cast<int64_t>(w.q_start + qi) * p.num_qo_heads + head;
    if (p.num_splits == 1) {
      uint4 bits;
      bits.x = PackTwo<T>(value[0], value[1]);
      bits.y = PackTwo<T>(value[2], value[3]);
      bits.z = PackTwo<T>(value[4], value[5]);
      bits.w = PackTwo<T>(value[6], value[7]);
      *reinterpret_cast<uint4*>(static_cast<T*>(p.o) + token_head * kHeadDim + col) = bits;
      if (p.lse != nullptr && col == 0) p.lse[token_head] = lse2 * device::kLn2;
    } else {
      const int64_t partial = split * p.total_q * p.num_qo_heads + token_head;
      float4* dst = reinterpret_cast<float4*>(p.partial_o + partial * kHeadDim + col);
      dst[0] = make_float4(value[0], value[1], value[2], value[3]);
      dst[1] = make_float4(value[4], value[5], value[6], value[7]);
      if (col == 0) p.partial_lse[partial] = lse2;
    }
  }
}

// Transposes the 8 x 8 16-bit matrix whose fragment the warp holds (thread t: row t / 4,
// columns 2 (t % 4) and 2 (t % 4) + 1, the first in the low half).
__device__ __forceinline__ uint32_t TransposeFragment(uint32_t fragment) {
  uint32_t transposed;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n"
               : "=r"(transposed)
               : "r"(fragment));
  return transposed;
}

// The 16-row kernel's block; `maps` (kTma) are its K and V caches' tensor maps.
template <typename T, int kHeadDim, int kStageCount, bool kTma>
__device__ __forceinline__ void MmaDecodeBlock(const DecodeKernelParams& p,
                                               const DecodeKvTensorMaps* maps) {
  static_assert(device::kIsAttentionType<T>, "T must be bf16 or fp16");
  static_assert(kHeadDim == 64 || kHeadDim == 128, "head_dim 64 or 128");
  constexpr int kRows = kMmaDecodeMaxRows;
  using Loader = std::conditional_t<kTma, WarpTmaTileLoader<T, kHeadDim, kStageCount>,
                                    WarpTileLoader<T, kHeadDim>>;

  extern __shared__ uint4 shared_raw[];
  device::AllowDependentLaunch();  // the merge kernel waits for this grid's writes itself
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane >> 2, quad_lane = lane & 3;
  const WarpWork w = WorkOf<kTileKeys, 0, kTma>(p, warp);
  const int kv_head = w.kv_head;

  // Row r is query token r / group_size, head kv_head * group_size + r % group_size. This
  // thread holds rows `group` and `group + 8` of the A fragments and of S and O.
  const T* q_row[2];
  int last_key[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = group + 8 * h;
    const int qi = r / p.group_size;
    q_row[h] = r < w.rows_total
                   ? static_cast<const T*>(p.q) +
                         (static_cast<int64_t>(w.q_start + qi) * p.num_qo_heads +
                          kv_head * p.group_size + r % p.group_size) *
                             kHeadDim
                   : nullptr;
    last_key[h] = r < w.rows_total && p.causal ? w.kv_len - w.q_len + qi : w.kv_len - 1;
  }
  uint32_t q_frag[kHeadDim / 16][4];
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 16; ++ks) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const T* row = q_row[i & 1];
      const int col = ks * 16 + (i >> 1) * 8 + quad_lane * 2;
      q_frag[ks][i] = row != nullptr ? __ldg(reinterpret_cast<const uint32_t*>(row + col)) : 0u;
    }
  }

  const Loader loader =
      LoaderFor<Loader, kStageCount,
                SharedBytes<kHeadDim, kRows, MergeRowStride<kHeadDim>(), kStageCount>()>(
          p, w, maps, shared_raw, warp, lane);
  int next_page = StartTiles<kStageCount>(loader, w.my_tiles);

  float o[kHeadDim / 8][4];
#pragma unroll
  for (int d = 0; d < kHeadDim / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};

  for (int i = 0; i < w.my_tiles; ++i) {
    const int stage = NextTile<kStageCount>(loader, i, w.my_tiles, next_page);
    const T* ks = loader.K(stage);
    const T* vs = loader.V(stage);

    // S = Q K^T: 16 rows x 16 keys, two k16 steps per K ldmatrix. The even and odd k16 steps
    // accumulate apart and are added at the end: two dependent mma chains of kHeadDim / 32
    // each instead of one twice as long, since with 2 warps a scheduler the chain's latency is
    // not hidden (ncu, H200, batch 32 x 1k: 6.2 cycles a warp between issues).
    float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    float s_odd[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 32; ++kk) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        uint32_t b[4];
        LdMatrixX4(b, SharedAddress(ks + Loader::Offset(nt * 8 + (lane & 7),
                                                        kk * 4 + (lane >> 3))));
        MmaM16N8K16<T>(s[nt], q_frag[2 * kk], b[0], b[1]);
        MmaM16N8K16<T>(s_odd[nt], q_frag[2 * kk + 1], b[2], b[3]);
      }
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] += s_odd[nt][e];
    }

    // Mask keys past the split or (causal drafts) past the row's token; online softmax, base 2.
    const int key0 = loader.FirstKey(i);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = key0 + nt * 8 + quad_lane * 2 + (e & 1);
        if (col >= w.kv_end || col > last_key[e >> 1]) s[nt][e] = -INFINITY;
      }
    }
    float correction[2];
    bool max_grew = false;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float tile_max = fmaxf(fmaxf(s[0][2 * h], s[0][2 * h + 1]), fmaxf(s[1][2 * h], s[1][2 * h + 1]));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float new_max = fmaxf(row_max[h], tile_max * p.scale_log2);
      const float base = new_max == -INFINITY ? 0.0f : new_max;
      correction[h] = FastExp2(row_max[h] - base);
      max_grew |= new_max != row_max[h];
      row_max[h] = new_max;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          s[nt][e] = FastExp2(fmaf(s[nt][e], p.scale_log2, -base));
          sum += s[nt][e];
        }
      }
      row_sum[h] = row_sum[h] * correction[h] + sum;
    }
    // O is rescaled only when some row's running max grew: after the first tiles it seldom
    // does, and the rescale is kHeadDim / 2 multiplies a thread per tile. Skipping it when no
    // max changed is exact (the factor would be 1).
    if (__any_sync(0xffffffffu, max_grew)) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int d = 0; d < kHeadDim / 8; ++d) {
          o[d][2 * h] *= correction[h];
          o[d][2 * h + 1] *= correction[h];
        }
      }
    }

    // O += P V: the two 8-key S tiles are the A fragment of one k16 step.
    uint32_t a[4];
    a[0] = PackTwo<T>(s[0][0], s[0][1]);
    a[1] = PackTwo<T>(s[0][2], s[0][3]);
    a[2] = PackTwo<T>(s[1][0], s[1][1]);
    a[3] = PackTwo<T>(s[1][2], s[1][3]);
#pragma unroll
    for (int dt = 0; dt < kHeadDim / 16; ++dt) {
      uint32_t b[4];
      LdMatrixX4Trans(b, SharedAddress(vs + Loader::Offset((lane & 7) + ((lane >> 3) & 1) * 8,
                                                           dt * 2 + (lane >> 4))));
      MmaM16N8K16<T>(o[2 * dt], a, b[0], b[1]);
      MmaM16N8K16<T>(o[2 * dt + 1], a, b[2], b[3]);
    }
  }
  if constexpr (!kTma) CpAsyncWait<0>();

  // Each warp's rows, unnormalised, into the merge.
  __syncthreads();  // every warp is done with its stages, which the merge reuses
  constexpr int kStride = MergeRowStride<kHeadDim>();
  const MergeBuffers<kRows, kStride> merge(shared_raw);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = row_sum[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int r = group + 8 * h;
    if (quad_lane == 0) {
      merge.max[warp * kRows + r] = row_max[h];
      merge.sum[warp * kRows + r] = sum;
    }
    float* out = merge.o + (warp * kRows + r) * kStride + quad_lane * 2;
#pragma unroll
    for (int d = 0; d < kHeadDim / 8; ++d) {
      *reinterpret_cast<float2*>(out + d * 8) = make_float2(o[d][2 * h], o[d][2 * h + 1]);
    }
  }
  __syncthreads();
  MergeWarpsAndStore<T, kHeadDim, kRows, kStride>(merge, p, w);
}

template <typename T, int kHeadDim, int kStageCount>
__global__ void __launch_bounds__(kThreads)
    MmaDecodeKernel(const __grid_constant__ DecodeKernelParams p) {
  MmaDecodeBlock<T, kHeadDim, kStageCount, false>(p, nullptr);
}

// The same block with K and V by TMA (sm_90; pages of a multiple of kTileKeys rows).
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    MmaDecodeTmaKernel(const __grid_constant__ DecodeKernelParams p,
                       const __grid_constant__ DecodeKvTensorMaps maps) {
#if __CUDA_ARCH__ >= 900
  MmaDecodeBlock<T, kHeadDim, kStages, true>(p, &maps);
#else
  __trap();
#endif
}

// The transposed kernel's block; `maps` (kTma) are its K and V caches' tensor maps.
template <typename T, int kHeadDim, int kStageCount, int kKeyTiles, bool kTma>
__device__ __forceinline__ void MmaDecodeTransposedBlock(const DecodeKernelParams& p,
                                                         const DecodeKvTensorMaps* maps) {
  static_assert(device::kIsAttentionType<T>, "T must be bf16 or fp16");
  static_assert(kHeadDim % 32 == 0, "two k16 steps a chain step");
  constexpr int kRows = kTransposedRows;
  constexpr int kTile = kKeyTiles * 16;  // keys a tile: kKeyTiles mma row tiles
  using Loader = std::conditional_t<kTma, WarpTmaTileLoader<T, kHeadDim, kStageCount, kTile>,
                                    WarpTileLoader<T, kHeadDim, kTile>>;

  extern __shared__ uint4 shared_raw[];
  device::AllowDependentLaunch();  // the merge kernel waits for this grid's writes itself
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane >> 2, quad_lane = lane & 3;
  const WarpWork w = WorkOf<kTile, kRows, kTma>(p, warp);
  // A sequence with fewer rows than another's in the batch leaves its last row chunks empty:
  // nothing to store, so no tiles to read (the whole block agrees).
  if (w.rows == 0) return;

  // The block's row r, the KV head's row w.row0 + r (query token row / group_size, head
  // kv_head * group_size + row % group_size), is column r of S^T and O^T. This thread holds
  // row `group` of the B fragments of Q^T, and columns 2 x quad_lane and 2 x quad_lane + 1 of
  // S^T and O^T.
  const int q_row_index = w.row0 + group;
  const int64_t q_head_row =
      static_cast<int64_t>(w.q_start + q_row_index / p.group_size) * p.num_qo_heads +
      w.kv_head * p.group_size + q_row_index % p.group_size;
  const T* q_row = group < w.rows ? static_cast<const T*>(p.q) + q_head_row * kHeadDim : nullptr;
  uint32_t q_frag[kHeadDim / 16][2];
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 16; ++ks) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int col = ks * 16 + i * 8 + quad_lane * 2;
      q_frag[ks][i] =
          q_row != nullptr ? __ldg(reinterpret_cast<const uint32_t*>(q_row + col)) : 0u;
    }
  }
  int last_key[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = 2 * quad_lane + h;
    last_key[h] = r < w.rows && p.causal ? w.kv_len - w.q_len + (w.row0 + r) / p.group_size
                                         : w.kv_len - 1;
  }

  const Loader loader =
      LoaderFor<Loader, kStageCount,
                SharedBytes<kHeadDim, kRows, TransposedMergeRowStride<kHeadDim>(), kStageCount,
                            kTile>()>(p, w, maps, shared_raw, warp, lane);
  int next_page = StartTiles<kStageCount>(loader, w.my_tiles);

  // O^T, tile dt: rows (head_dim columns) 16 dt + group and 16 dt + group + 8.
  float o[kHeadDim / 16][4];
#pragma unroll
  for (int dt = 0; dt < kHeadDim / 16; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};

  for (int i = 0; i < w.my_tiles; ++i) {
    const int stage = NextTile<kStageCount>(loader, i, w.my_tiles, next_page);
    const T* ks = loader.K(stage);
    const T* vs = loader.V(stage);

    // S^T = K Q^T: 16 keys x 8 rows a row tile kt, one K ldmatrix a k16 step, the even and odd
    // steps in two chains. s[kt][e]: key 16 kt + group + 8 (e / 2), row 2 quad_lane + e % 2.
    float s[kKeyTiles][4], s_odd[kKeyTiles][4];
#pragma unroll
    for (int kt = 0; kt < kKeyTiles; ++kt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[kt][e] = s_odd[kt][e] = 0.0f;
    }
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; kk += 2) {
#pragma unroll
      for (int kt = 0; kt < kKeyTiles; ++kt) {
        uint32_t a[4], a_odd[4];
        const int key = 16 * kt + lane % 16;
        LdMatrixX4(a, SharedAddress(ks + Loader::Offset(key, 2 * kk + lane / 16)));
        LdMatrixX4(a_odd, SharedAddress(ks + Loader::Offset(key, 2 * kk + 2 + lane / 16)));
        MmaM16N8K16<T>(s[kt], a, q_frag[kk][0], q_frag[kk][1]);
        MmaM16N8K16<T>(s_odd[kt], a_odd, q_frag[kk + 1][0], q_frag[kk + 1][1]);
      }
    }
#pragma unroll
    for (int kt = 0; kt < kKeyTiles; ++kt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[kt][e] += s_odd[kt][e];
    }

    // Mask keys past the split or (causal drafts) past the row's token; online softmax, base 2,
    // each row's max over the 8 lanes that share quad_lane.
    const int key0 = loader.FirstKey(i);
#pragma unroll
    for (int kt = 0; kt < kKeyTiles; ++kt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + 16 * kt + group + 8 * (e >> 1);
        if (key >= w.kv_end || key > last_key[e & 1]) s[kt][e] = -INFINITY;
      }
    }
    float correction[2];
    bool max_grew = false;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int kt = 0; kt < kKeyTiles; ++kt) tile_max = fmaxf(tile_max, fmaxf(s[kt][h], s[kt][h + 2]));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 4));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 8));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 16));
      const float new_max = fmaxf(row_max[h], tile_max * p.scale_log2);
      const float base = new_max == -INFINITY ? 0.0f : new_max;
      correction[h] = FastExp2(row_max[h] - base);
      max_grew |= new_max != row_max[h];
      row_max[h] = new_max;
      float sum = 0.0f;
#pragma unroll
      for (int kt = 0; kt < kKeyTiles; ++kt) {
        s[kt][h] = FastExp2(fmaf(s[kt][h], p.scale_log2, -base));
        s[kt][h + 2] = FastExp2(fmaf(s[kt][h + 2], p.scale_log2, -base));
        sum += s[kt][h] + s[kt][h + 2];
      }
      row_sum[h] = row_sum[h] * correction[h] + sum;
    }
    if (__any_sync(0xffffffffu, max_grew)) {  // exact: the factor is 1 where no max grew
#pragma unroll
      for (int dt = 0; dt < kHeadDim / 16; ++dt) {
        o[dt][0] *= correction[0];
        o[dt][1] *= correction[1];
        o[dt][2] *= correction[0];
        o[dt][3] *= correction[1];
      }
    }

    // O^T += V^T P^T. P^T's B fragment (keys 2 quad_lane.. of row `group`) is S^T's accumulator
    // (key `group`, rows 2 quad_lane..) transposed, one 8 x 8 block per eight keys; V^T's A
    // fragments are the V tile read transposed.
    uint32_t p_lo[kKeyTiles], p_hi[kKeyTiles];
#pragma unroll
    for (int kt = 0; kt < kKeyTiles; ++kt) {
      p_lo[kt] = TransposeFragment(PackTwo<T>(s[kt][0], s[kt][1]));
      p_hi[kt] = TransposeFragment(PackTwo<T>(s[kt][2], s[kt][3]));
    }
#pragma unroll
    for (int dt = 0; dt < kHeadDim / 16; ++dt) {
#pragma unroll
      for (int kt = 0; kt < kKeyTiles; ++kt) {
        uint32_t a[4];
        LdMatrixX4Trans(a, SharedAddress(vs + Loader::Offset(16 * kt + (lane & 7) + (lane >> 4) * 8,
                                                             dt * 2 + ((lane >> 3) & 1))));
        MmaM16N8K16<T>(o[dt], a, p_lo[kt], p_hi[kt]);
      }
    }
  }
  if constexpr (!kTma) CpAsyncWait<0>();

  // Each warp's rows, unnormalised, into the merge: row r's sum over the 8 lanes holding it.
  __syncthreads();  // every warp is done with its stages, which the merge reuses
  constexpr int kStride = TransposedMergeRowStride<kHeadDim>();
  const MergeBuffers<kRows, kStride> merge(shared_raw);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = row_sum[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 4);
    sum += __shfl_xor_sync(0xffffffffu, sum, 8);
    sum += __shfl_xor_sync(0xffffffffu, sum, 16);
    const int r = 2 * quad_lane + h;
    if (group == 0) {
      merge.max[warp * kRows + r] = row_max[h];
      merge.sum[warp * kRows + r] = sum;
    }
    float* out = merge.o + (warp * kRows + r) * kStride + group;
#pragma unroll
    for (int dt = 0; dt < kHeadDim / 16; ++dt) {
      out[dt * 16] = o[dt][h];
      out[dt * 16 + 8] = o[dt][h + 2];
    }
  }
  __syncthreads();
  MergeWarpsAndStore<T, kHeadDim, kRows, kStride>(merge, p, w);
}

template <typename T, int kHeadDim, int kStageCount, int kKeyTiles>
__global__ void __launch_bounds__(kThreads)
    MmaDecodeTransposedKernel(const __grid_constant__ DecodeKernelParams p) {
  MmaDecodeTransposedBlock<T, kHeadDim, kStageCount, kKeyTiles, false>(p, nullptr);
}

// The same block with K and V by TMA (sm_90; pages of a multiple of kTileKeys rows).
template <typename T, int kHeadDim, int kStageCount, int kKeyTiles>
__global__ void __launch_bounds__(kThreads)
    MmaDecodeTransposedTmaKernel(const __grid_constant__ DecodeKernelParams p,
                                 const __grid_constant__ DecodeKvTensorMaps maps) {
#if __CUDA_ARCH__ >= 900
  MmaDecodeTransposedBlock<T, kHeadDim, kStageCount, kKeyTiles, true>(p, &maps);
#else
  __trap();
#endif
}

// A kernel and the dynamic shared memory it launches with. The TMA kernels take their K and V
// tensor maps beside the parameters.
using CpAsyncKernel = void (*)(DecodeKernelParams);
using TmaKernel = void (*)(DecodeKernelParams, DecodeKvTensorMaps);
template <typename Kernel>
struct KernelAndSharedBytes {
  Kernel kernel;
  int shared_bytes;
};

bool LoadsByTma(MmaDecodeLoads loads) {
  return loads == MmaDecodeLoads::kTma || loads == MmaDecodeLoads::kLongTilesTma;
}
bool LoadsLongTiles(MmaDecodeLoads loads) {
  return loads == MmaDecodeLoads::kLongTiles || loads == MmaDecodeLoads::kLongTilesTma;
}

absl::Status RefusesLongTiles(int head_dim) {
  return absl::InvalidArgumentError(absl::StrCat("head_dim (", head_dim, ") has no ",
                                                 kMmaDecodeLongTileKeys,
                                                 "-key-tile tensor-core decode kernel (64)"));
}

template <bool kTma>
using KernelLoading = std::conditional_t<kTma, TmaKernel, CpAsyncKernel>;

// The 16-row kernel at kHeadDim loading by TMA or by cp.async, and its dynamic shared memory.
template <typename T, int kHeadDim, bool kTma>
KernelAndSharedBytes<KernelLoading<kTma>> SixteenRowKernel() {
  constexpr int kBytes =
      SharedBytes<kHeadDim, kMmaDecodeMaxRows, MergeRowStride<kHeadDim>(), kStages>();
  if constexpr (kTma) {
    return {MmaDecodeTmaKernel<T, kHeadDim>, TmaSharedBytes<kBytes, kStages>()};
  } else {
    return {MmaDecodeKernel<T, kHeadDim, kStages>, kBytes};
  }
}

// The transposed (8-row) kernel of kTile-key tiles, either load kind, and its shared memory.
template <typename T, int kHeadDim, int kStageCount, int kTile, bool kTma>
KernelAndSharedBytes<KernelLoading<kTma>> TransposedKernel() {
  constexpr int kBytes = SharedBytes<kHeadDim, kTransposedRows,
                                     TransposedMergeRowStride<kHeadDim>(), kStageCount, kTile>();
  if constexpr (kTma) {
    return {MmaDecodeTransposedTmaKernel<T, kHeadDim, kStageCount, kTile / 16>,
            TmaSharedBytes<kBytes, kStageCount>()};
  } else {
    return {MmaDecodeTransposedKernel<T, kHeadDim, kStageCount, kTile / 16>, kBytes};
  }
}

// The kernel for head_dim 64 or 128 (the 16-row kernel) or 256 (the transposed one), or the
// long-tile one at 64 (the transposed kernel's 32-key tiles, two stages), loading by TMA
// (sm_90) or by cp.async, and its dynamic shared memory.
template <typename T, bool kTma>
absl::StatusOr<KernelAndSharedBytes<KernelLoading<kTma>>> KernelFor(int head_dim,
                                                                    bool long_tiles) {
  if (long_tiles) {
    if (!MmaDecodeSupportsLongTiles(head_dim)) return RefusesLongTiles(head_dim);
    return TransposedKernel<T, 64, kLongTileStages, kMmaDecodeLongTileKeys, kTma>();
  }
  switch (head_dim) {
    case 64:
      return SixteenRowKernel<T, 64, kTma>();
    case 128:
      return SixteenRowKernel<T, 128, kTma>();
    case 256: {
      // Three stages (192 KiB a block, 195 by TMA) where a block may have that much shared
      // memory (sm_90, which the TMA kernels need); two (128 KiB) within sm_80's 163 KiB.
      if constexpr (kTma) {
        return TransposedKernel<T, 256, kStages, kTileKeys, true>();
      } else {
        const auto three = TransposedKernel<T, 256, 3, kTileKeys, false>();
        ASSIGN_OR_RETURN(const gpu::DeviceFacts device, gpu::CurrentDeviceFacts());
        if (device.max_shared_bytes_per_block >= three.shared_bytes) return three;
        return TransposedKernel<T, 256, 2, kTileKeys, false>();
      }
    }
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("head_dim (", head_dim,
                                                 ") has no tensor-core decode kernel",
                                                 kTma ? " loading by TMA" : "", " (64, 128, 256)"));
}

// Allows `chosen` its dynamic shared memory (above the 48 KiB default).
template <typename Kernel>
absl::Status AllowSharedBytes(const KernelAndSharedBytes<Kernel>& chosen) {
  CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
      chosen.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, chosen.shared_bytes));
  return absl::OkStatus();
}

// Blocks of `chosen` resident on an SM.
template <typename Kernel>
absl::StatusOr<int> ResidentBlocks(const KernelAndSharedBytes<Kernel>& chosen) {
  RETURN_IF_ERROR(AllowSharedBytes(chosen));
  int blocks = 0;
  CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, chosen.kernel, kThreads, chosen.shared_bytes));
  return blocks;
}

template <typename T>
absl::StatusOr<int> BlocksPerSmTyped(int head_dim, MmaDecodeLoads loads) {
  if (LoadsByTma(loads)) {
    ASSIGN_OR_RETURN(const auto chosen, (KernelFor<T, true>(head_dim, LoadsLongTiles(loads))));
    return ResidentBlocks(chosen);
  }
  ASSIGN_OR_RETURN(const auto chosen, (KernelFor<T, false>(head_dim, LoadsLongTiles(loads))));
  return ResidentBlocks(chosen);
}

// Launches `chosen` over `grid` with `args` (the kernel's own parameter types).
template <typename... Params>
absl::Status LaunchChosen(const KernelAndSharedBytes<void (*)(Params...)>& chosen, dim3 grid,
                          cudaStream_t stream, const Params&... args) {
  RETURN_IF_ERROR(AllowSharedBytes(chosen));
  chosen.kernel<<<grid, kThreads, chosen.shared_bytes, stream>>>(args...);
  CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

template <typename T>
absl::Status LaunchTyped(const DecodeKernelParams& params, const MmaDecodeLaunch& launch,
                         cudaStream_t stream) {
  const dim3 grid(params.num_splits, launch.num_kv_heads * params.row_chunks, launch.batch);
  const bool long_tiles = LoadsLongTiles(launch.loads);
  if (!LoadsByTma(launch.loads)) {
    ASSIGN_OR_RETURN(const auto chosen, (KernelFor<T, false>(launch.head_dim, long_tiles)));
    return LaunchChosen(chosen, grid, stream, params);
  }
  ASSIGN_OR_RETURN(const auto chosen, (KernelFor<T, true>(launch.head_dim, long_tiles)));
  DecodeKvTensorMaps maps;
  for (auto [cache, map] : {std::pair{params.k_cache, &maps.k}, {params.v_cache, &maps.v}}) {
    // Each box row is a KV head's 128-byte half of a slot, 2 KiB from the next at 8 KV
    // heads: fetched as 256 bytes (the prefill's promotion) the kernel took 1.05-1.07x the
    // cp.async kernel's time from 4k keys at batch >= 32; as 128, 0.98-1.00x (H200).
    if (!sm90::EncodeHeadRowsTensorMap<T>(cache, launch.head_dim, launch.num_kv_heads,
                                          launch.cache_slots, params.kv_row_stride, kTileKeys,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_128B, *map)) {
      return absl::InvalidArgumentError(
          "the KV cache: the driver would not describe it to the TMA unit (its address or "
          "row stride), so the decode cannot load it by TMA");
    }
  }
  return LaunchChosen(chosen, grid, stream, params, maps);
}

absl::Status MmaDecodeRefusesDtype(AttentionDtype dtype) {
  return absl::InvalidArgumentError(absl::StrCat(
      "dtype: got ", std::string(DtypeName(dtype)),
      "; the tensor-core decode kernel takes bf16 or fp16 (fp8 e4m3 runs in the Hopper prefill "
      "only)"));
}

}  // namespace

bool MmaDecodeSupportsHeadDim(int head_dim) {
  return head_dim == 64 || head_dim == 128 || head_dim == 256;
}

bool MmaDecodeSupportsLongTiles(int head_dim) { return head_dim == 64; }

bool MmaDecodeSupportsTma(int head_dim, int page_size, int compute_major) {
  return MmaDecodeSupportsHeadDim(head_dim) && page_size % kTileKeys == 0 && compute_major >= 9;
}

absl::StatusOr<int> MmaDecodeBlocksPerSm(int head_dim, AttentionDtype dtype,
                                         MmaDecodeLoads loads) {
  switch (dtype) {
    case AttentionDtype::kBf16:
      return BlocksPerSmTyped<__nv_bfloat16>(head_dim, loads);
    case AttentionDtype::kFp16:
      return BlocksPerSmTyped<__half>(head_dim, loads);
    case AttentionDtype::kFp8E4m3:
      break;
  }
  return MmaDecodeRefusesDtype(dtype);
}

absl::Status LaunchMmaDecode(const DecodeKernelParams& params, const MmaDecodeLaunch& launch,
                             cudaStream_t stream) {
  switch (launch.dtype) {
    case AttentionDtype::kBf16:
      return LaunchTyped<__nv_bfloat16>(params, launch, stream);
    case AttentionDtype::kFp16:
      return LaunchTyped<__half>(params, launch, stream);
    case AttentionDtype::kFp8E4m3:
      break;
  }
  return MmaDecodeRefusesDtype(launch.dtype);
}

}  // namespace gpuprof::attention
