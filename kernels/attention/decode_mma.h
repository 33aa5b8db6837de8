// Decode on tensor cores: the query rows of one KV head (group members x draft tokens, up to
// TensorCoreRowsPerBlock) are one side of an mma.sync m16n8k16 tile, so each KV row's dot
// products with all of them are a few tensor-core instructions instead of CUDA-core FMAs and
// shuffles.
// Same inputs, splits and outputs (partials for the merge) as the CUDA-core kernel in decode.cu,
// which launches it. Internal to the decode target.
#ifndef GPUPROF_KERNELS_ATTENTION_DECODE_MMA_H_
#define GPUPROF_KERNELS_ATTENTION_DECODE_MMA_H_

#include <cuda_runtime_api.h>

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

// Whether the tensor-core kernel exists for this head_dim, and its long-tile variant
// (kMmaDecodeLongTileKeys keys a tile).
bool MmaDecodeSupportsHeadDim(int head_dim);
bool MmaDecodeSupportsLongTiles(int head_dim);

// Resident blocks per SM of the kernel for `head_dim` and `dtype` (`long_tiles`: the
// kMmaDecodeLongTileKeys-key kernel, head_dim 64 only).
absl::StatusOr<int> MmaDecodeBlocksPerSm(int head_dim, AttentionDtype dtype, bool long_tiles);

// Launches the kernel over (params.num_splits, KV heads, batch) blocks; every sequence's
// q_len x group_size must be <= kMmaDecodeMaxRows (checked by the caller).
absl::Status LaunchMmaDecode(const DecodeKernelParams& params, int head_dim, AttentionDtype dtype,
                             bool long_tiles, int num_kv_heads, int batch, cudaStream_t stream);

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_DECODE_MMA_H_
