// Decode on tensor cores: the query rows of one KV head (group members x draft tokens, up to
// TensorCoreRowsPerBlock) are one side of an mma.sync m16n8k16 tile, so each KV row's dot
// products with all of them are a few tensor-core instructions instead of CUDA-core FMAs and
// shuffles.
// Same inputs, splits and outputs (partials for the merge) as the CUDA-core kernel in decode.cu,
// which launches it. Internal to the decode target.
#ifndef GPUPROF_KERNELS_ATTENTION_DECODE_MMA_H_
#define GPUPROF_KERNELS_ATTENTION_DECODE_MMA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/decode_kernel_params.h"
#include "kernels/attention/decode_plan.h"

namespace gpuprof::attention {

inline constexpr int kMmaDecodeMaxRows = kTensorCoreRowsPerBlock;
inline constexpr int kMmaDecodeThreads = 128;  // per block: 4 warps
// Keys a warp loads and computes at once in the long-tile kernel (head_dim 64, up to 8 rows):
// 8 KiB of K and V a stage, as a 16-key tile is at head_dim 128, where 16 keys are 4 KiB.
inline constexpr int kMmaDecodeLongTileKeys = 32;

// How the tensor-core kernel's warps load their K and V tiles: cp.async copies of 16 keys
// (any page size), the same in 32-key tiles (kMmaDecodeLongTileKeys; the transposed kernel at
// head_dim 64), TMA boxes of 16 keys (sm_90, pages of a multiple of 16 rows), or 32-key tiles
// as two such boxes.
enum class MmaDecodeLoads { kCpAsync, kLongTiles, kTma, kLongTilesTma };

// Whether the tensor-core kernel exists for this head_dim, its long-tile variant, and its TMA
// loads for this head_dim, page size and compute capability.
bool MmaDecodeSupportsHeadDim(int head_dim);
bool MmaDecodeSupportsLongTiles(int head_dim);
bool MmaDecodeSupportsTma(int head_dim, int page_size, int compute_major);

// Resident blocks per SM of the kernel for `head_dim`, `dtype` and `loads`.
absl::StatusOr<int> MmaDecodeBlocksPerSm(int head_dim, AttentionDtype dtype,
                                         MmaDecodeLoads loads);

// What a launch needs besides the kernel's parameters.
struct MmaDecodeLaunch {
  int head_dim = 0;
  AttentionDtype dtype = AttentionDtype::kBf16;
  MmaDecodeLoads loads = MmaDecodeLoads::kCpAsync;
  int num_kv_heads = 0;
  int batch = 0;
  int64_t cache_slots = 0;  // slots of the K and V caches (pages x page size): the TMA maps' extent
};

// Launches the kernel over (params.num_splits, KV heads x row chunks, batch) blocks; every
// sequence's q_len x group_size must fit its rows (checked by the caller), and TMA loads need
// MmaDecodeSupportsTma.
absl::Status LaunchMmaDecode(const DecodeKernelParams& params, const MmaDecodeLaunch& launch,
                             cudaStream_t stream);

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_DECODE_MMA_H_
