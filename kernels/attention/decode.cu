// Paged decode attention on CUDA cores, split along the KV length (flash-decoding).
//
// One block per (split, KV head x row chunk, sequence). The block's query rows are the group's
// query heads times the draft tokens (up to kRows of them), held in registers, so the KV head is
// read from memory once for all of them. kHeadDim / 8 threads share one KV row, each holding a
// 16-byte slice; 128 / (kHeadDim / 8) rows are read side by side and kUnroll rows per thread
// are loaded before the first use, to keep enough bytes in flight to stream at memory speed.
// Every row slot keeps its own online softmax; the slots are merged in shared memory, and the
// splits by DecodeMergeKernel.
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cuda_status.h"
#include "gpu/device_facts.h"
#include "kernels/attention/attention_device.cuh"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/decode.h"
#include "kernels/attention/decode_kernel_params.h"
#include "kernels/attention/decode_mma.h"
#include "kernels/attention/decode_plan.h"
#include "kernels/attention/head_dims.h"

namespace gpuprof::attention {
namespace {

using device::FastExp2;
using device::PagedRow;
using device::UnpackEight;

inline constexpr int kDecodeThreads = 128;
inline constexpr int kDecodeUnroll = 4;

// kPrefetch: the next iteration's rows (and their page-table entries, a dependent load) are
// requested before this iteration's math, so the memory system always has a batch in flight;
// it costs registers, so fewer blocks may be resident (PlanDecode weighs the two).
template <typename T, int kHeadDim, int kRows, bool kPrefetch>
__global__ void __launch_bounds__(kDecodeThreads)
    DecodeKernel(const __grid_constant__ DecodeKernelParams p) {
  static_assert(device::kIsAttentionType<T>, "T must be bf16 or fp16");
  static_assert(IsAttentionHeadDim(kHeadDim), "a head size of kAttentionHeadDims");
  static_assert(kRows >= 1 && kRows <= kMaxDecodeRowsPerBlock,
                "rows per block: 1..kMaxDecodeRowsPerBlock");
  constexpr int kThreadsPerRow = kHeadDim / 8;
  constexpr int kSlots = kDecodeThreads / kThreadsPerRow;
  static_assert(kThreadsPerRow <= 32 && kSlots >= 1);

  __shared__ float slot_max[kSlots][kRows];
  __shared__ float slot_sum[kSlots][kRows];
  __shared__ float merged_o[kRows][kHeadDim];
  // The merge kernel (launched programmatically dependent) may be scheduled now; it waits for
  // this grid's writes before it reads them.
  device::AllowDependentLaunch();

  const int split = blockIdx.x;
  const int kv_head = blockIdx.y / p.row_chunks;
  const int row0 = (blockIdx.y % p.row_chunks) * kRows;
  const int seq = blockIdx.z;
  const int q_start = p.q_indptr[seq];
  const int q_len = p.q_indptr[seq + 1] - q_start;
  const int rows_total = q_len * p.group_size;
  if (row0 >= rows_total) return;
  const int kv_len = p.kv_lens[seq];
  const int chunk_len = (kv_len + p.num_splits - 1) / p.num_splits;
  const int kv_begin = min(kv_len, split * chunk_len);
  const int kv_end = min(kv_len, kv_begin + chunk_len);

  const int slot = threadIdx.x / kThreadsPerRow;
  const int lane_in_row = threadIdx.x % kThreadsPerRow;

  // This thread's slice of every query row, pre-scaled into base 2; the last key each may see.
  float q[kRows][8];
  int last_key[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int row = row0 + r;
    const int qi = row / p.group_size;
    const int head = kv_head * p.group_size + row % p.group_size;
    if (row < rows_total) {
      const uint4 bits = __ldg(reinterpret_cast<const uint4*>(
          static_cast<const T*>(p.q) +
          (static_cast<int64_t>(q_start + qi) * p.num_qo_heads + head) * kHeadDim +
          lane_in_row * 8));
      UnpackEight<T>(bits, q[r]);
#pragma unroll
      for (int e = 0; e < 8; ++e) q[r][e] *= p.scale_log2;
      last_key[r] = p.causal ? kv_len - q_len + qi : kv_len - 1;
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) q[r][e] = 0.0f;
      last_key[r] = -1;
    }
  }

  float row_max[kRows], row_sum[kRows], acc[kRows][8];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    row_max[r] = -INFINITY;
    row_sum[r] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[r][e] = 0.0f;
  }

  const int32_t* pages = p.page_indices + p.page_indptr[seq];
  const T* k_base = static_cast<const T*>(p.k_cache) + kv_head * kHeadDim + lane_in_row * 8;
  const T* v_base = static_cast<const T*>(p.v_cache) + kv_head * kHeadDim + lane_in_row * 8;

  // Every thread runs the same iterations (the shuffles below need the whole warp); row slots
  // past the split's end load nothing and mask their scores.
  auto load_rows = [&](int base, uint4 (&k_bits)[kDecodeUnroll], uint4 (&v_bits)[kDecodeUnroll]) {
#pragma unroll
    for (int u = 0; u < kDecodeUnroll; ++u) {
      const int j = base + slot + u * kSlots;
      if (j < kv_end) {
        const int64_t offset = PagedRow(pages, j, p.log2_page_size) * p.kv_row_stride;
        k_bits[u] = __ldg(reinterpret_cast<const uint4*>(k_base + offset));
        v_bits[u] = __ldg(reinterpret_cast<const uint4*>(v_base + offset));
      } else {
        k_bits[u] = v_bits[u] = make_uint4(0, 0, 0, 0);
      }
    }
  };
  constexpr int kStep = kSlots * kDecodeUnroll;
  uint4 next_k[kDecodeUnroll], next_v[kDecodeUnroll];
  if (kPrefetch && kv_begin < kv_end) load_rows(kv_begin, next_k, next_v);
  for (int base = kv_begin; base < kv_end; base += kStep) {
    uint4 k_bits[kDecodeUnroll], v_bits[kDecodeUnroll];
    if constexpr (kPrefetch) {
#pragma unroll
      for (int u = 0; u < kDecodeUnroll; ++u) {
        k_bits[u] = next_k[u];
        v_bits[u] = next_v[u];
      }
      if (base + kStep < kv_end) load_rows(base + kStep, next_k, next_v);
    } else {
      load_rows(base, k_bits, v_bits);
    }
    float s[kDecodeUnroll][kRows];
#pragma unroll
    for (int u = 0; u < kDecodeUnroll; ++u) {
      float k[8];
      UnpackEight<T>(k_bits[u], k);
      const int j = base + slot + u * kSlots;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) dot = fmaf(q[r][e], k[e], dot);
#pragma unroll
        for (int offset = kThreadsPerRow / 2; offset > 0; offset /= 2) {
          dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        }
        s[u][r] = (j < kv_end && j <= last_key[r]) ? dot : -INFINITY;
      }
    }
    float base_max[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float new_max = row_max[r];
#pragma unroll
      for (int u = 0; u < kDecodeUnroll; ++u) new_max = fmaxf(new_max, s[u][r]);
      base_max[r] = new_max == -INFINITY ? 0.0f : new_max;
      const float correction = FastExp2(row_max[r] - base_max[r]);
      row_max[r] = new_max;
      row_sum[r] *= correction;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[r][e] *= correction;
    }
#pragma unroll
    for (int u = 0; u < kDecodeUnroll; ++u) {
      float v[8];
      UnpackEight<T>(v_bits[u], v);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float prob = FastExp2(s[u][r] - base_max[r]);
        row_sum[r] += prob;
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r][e] = fmaf(prob, v[e], acc[r][e]);
      }
    }
  }

  // Merge the row slots of this block.
  if (lane_in_row == 0) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      slot_max[slot][r] = row_max[r];
      slot_sum[slot][r] = row_sum[r];
    }
  }
  for (int i = threadIdx.x; i < kRows * kHeadDim; i += kDecodeThreads) {
    (&merged_o[0][0])[i] = 0.0f;
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    float m = -INFINITY;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) m = fmaxf(m, slot_max[s][r]);
    if (m == -INFINITY) continue;
    const float weight = FastExp2(row_max[r] - m);
#pragma unroll
    for (int e = 0; e < 8; ++e) atomicAdd(&merged_o[r][lane_in_row * 8 + e], acc[r][e] * weight);
  }
  __syncthreads();

  // Row slot r writes rows r, r + kSlots, ... (one 16-byte slice per thread).
  for (int r = slot; r < kRows; r += kSlots) {
    const int row = row0 + r;
    if (row >= rows_total) break;
    float m = -INFINITY;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) m = fmaxf(m, slot_max[s][r]);
    float sum = 0.0f;
    if (m != -INFINITY) {
#pragma unroll
      for (int s = 0; s < kSlots; ++s) sum += slot_sum[s][r] * FastExp2(slot_max[s][r] - m);
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    float out[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) out[e] = merged_o[r][lane_in_row * 8 + e] * inv;
    const int qi = row / p.group_size;
    const int head = kv_head * p.group_size + row % p.group_size;
    const int64_t token_head = static_cast<int64_t>(q_start + qi) * p.num_qo_heads + head;
    const float lse2 = sum > 0.0f ? m + __log2f(sum) : -INFINITY;
    if (p.num_splits == 1) {
      uint4 bits;
      bits.x = device::PackTwo<T>(out[0], out[1]);
      bits.y = device::PackTwo<T>(out[2], out[3]);
      bits.z = device::PackTwo<T>(out[4], out[5]);
      bits.w = device::PackTwo<T>(out[6], out[7]);
      *reinterpret_cast<uint4*>(static_cast<T*>(p.o) + token_head * kHeadDim + lane_in_row * 8) =
          bits;
      if (p.lse != nullptr && lane_in_row == 0) p.lse[token_head] = lse2 * device::kLn2;
    } else {
      const int64_t partial = split * p.total_q * p.num_qo_heads + token_head;
      float4* dst = reinterpret_cast<float4*>(p.partial_o + partial * kHeadDim + lane_in_row * 8);
      dst[0] = make_float4(out[0], out[1], out[2], out[3]);
      dst[1] = make_float4(out[4], out[5], out[6], out[7]);
      if (lane_in_row == 0) p.partial_lse[partial] = lse2;
    }
  }
}

struct DecodeMergeParams {
  const float* partial_o;
  const float* partial_lse;
  void* o;
  float* lse;
  int64_t rows;  // total_q * num_qo_heads
  int num_splits;
};

// One block of kHeadDim / 4 threads per (token, head): weights each split by
// exp2(lse_split - max) and normalises. The split LSEs are loaded side by side into shared
// memory first and the partial outputs kMergeUnroll at a time, so that the loads do not queue
// one behind the other (at batch 1 with 64 splits a serial loop cost more than the decode).
inline constexpr int kMergeUnroll = 8;

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kHeadDim / 4)
    DecodeMergeKernel(const __grid_constant__ DecodeMergeParams p) {
  static_assert(device::kIsAttentionType<T>, "T must be bf16 or fp16");
  static_assert(IsAttentionHeadDim(kHeadDim), "a head size of kAttentionHeadDims");
  __shared__ float weights[kMaxDecodeSplits];
  __shared__ float max_lse;
  const int64_t row = blockIdx.x;
  device::WaitForPrimaryGrid();  // the split kernel's partial outputs
  for (int s = threadIdx.x; s < p.num_splits; s += blockDim.x) {
    weights[s] = p.partial_lse[s * p.rows + row];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = -INFINITY;
    for (int s = 0; s < p.num_splits; ++s) m = fmaxf(m, weights[s]);
    max_lse = m;
  }
  __syncthreads();
  const float m = max_lse;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float sum = 0.0f;
  for (int s0 = 0; s0 < p.num_splits; s0 += kMergeUnroll) {
    float4 part[kMergeUnroll];
#pragma unroll
    for (int u = 0; u < kMergeUnroll; ++u) {
      const int s = s0 + u;
      part[u] = s < p.num_splits ? reinterpret_cast<const float4*>(
                                       p.partial_o + (s * p.rows + row) * kHeadDim)[threadIdx.x]
                                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int u = 0; u < kMergeUnroll; ++u) {
      const int s = s0 + u;
      // An empty split has LSE -inf, weight 0 (and a zero partial output).
      const float weight = s < p.num_splits ? FastExp2(weights[s] - m) : 0.0f;
      sum += weight;
      acc.x = fmaf(weight, part[u].x, acc.x);
      acc.y = fmaf(weight, part[u].y, acc.y);
      acc.z = fmaf(weight, part[u].z, acc.z);
      acc.w = fmaf(weight, part[u].w, acc.w);
    }
  }
  const float inv = 1.0f / sum;
  uint2 bits;
  bits.x = device::PackTwo<T>(acc.x * inv, acc.y * inv);
  bits.y = device::PackTwo<T>(acc.z * inv, acc.w * inv);
  reinterpret_cast<uint2*>(static_cast<T*>(p.o) + row * kHeadDim)[threadIdx.x] = bits;
  if (p.lse != nullptr && threadIdx.x == 0) p.lse[row] = (m + __log2f(sum)) * device::kLn2;
}

MmaDecodeLoads MmaLoadsOf(bool long_tiles, bool tma) {
  if (long_tiles) return tma ? MmaDecodeLoads::kLongTilesTma : MmaDecodeLoads::kLongTiles;
  return tma ? MmaDecodeLoads::kTma : MmaDecodeLoads::kCpAsync;
}

bool IsLongTileDecode(DecodeKernelChoice kernel) {
  return kernel == DecodeKernelChoice::kTensorCoresLongTiles ||
         kernel == DecodeKernelChoice::kTensorCoresLongTilesTma;
}
bool IsTmaDecode(DecodeKernelChoice kernel) {
  return kernel == DecodeKernelChoice::kTensorCoresTma ||
         kernel == DecodeKernelChoice::kTensorCoresLongTilesTma;
}

// Why the tensor-core `kernel` cannot run at head_dim, page_size on a GPU of compute_major; OK
// where it can, and for the kernels without tensor cores (they take every shape).
absl::Status TensorCoreDecodeRefuses(DecodeKernelChoice kernel, int head_dim, int page_size,
                                     int compute_major) {
  if (!IsTensorCoreDecode(kernel)) return absl::OkStatus();
  if (!MmaDecodeSupportsHeadDim(head_dim)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the tensor-core decode kernel takes head_dim 64, 128 or 256; got ", head_dim));
  }
  if (IsLongTileDecode(kernel) && !MmaDecodeSupportsLongTiles(head_dim)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the long-tile tensor-core decode kernel takes head_dim 64; got ", head_dim));
  }
  if (IsTmaDecode(kernel) && !MmaDecodeSupportsTma(head_dim, page_size, compute_major)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the tensor-core decode kernel loads by TMA at head_dim 64, 128 or 256, page_size a "
        "multiple of 16, on compute capability 9.0 or newer; got head_dim ", head_dim,
        ", page_size ", page_size, ", compute capability ", compute_major, ".x"));
  }
  return absl::OkStatus();
}

// The rows (group x q_len) a tensor-core block holds, and how many such blocks a KV head's rows
// may take: the plan's limit and DecodeKernelTakes'.
struct TensorCoreRowLimit {
  int rows_per_block;
  int chunks;
};
TensorCoreRowLimit TensorCoreRowLimitOf(int head_dim, bool long_tiles) {
  if (long_tiles) return {kTransposedTensorCoreRows, 1};
  return {TensorCoreRowsPerBlock(head_dim), TensorCoreRowChunks(head_dim)};
}

// The kernel `info.plan` names over its splits, then the merge when there is more than one
// (overlapped where `device` has programmatic dependent launch). The split count is first
// clamped to what options.workspace holds.
template <typename T, int kHeadDim, int kRows>
absl::StatusOr<DecodeLaunchInfo> LaunchPlanned(DecodeKernelParams params,
                                               const AttentionProblem& problem,
                                               const DecodeOptions& options,
                                               const gpu::DeviceFacts& device,
                                               DecodeLaunchInfo info, cudaStream_t stream) {
  const AttentionShape& shape = problem.shape;
  if (info.plan.num_splits > 1) {
    const size_t per_split = DecodeWorkspaceBytes(shape, problem.lengths, 2) / 2;
    const int64_t fits =
        per_split == 0 ? 0 : static_cast<int64_t>(options.workspace_bytes / per_split);
    if (options.num_splits > 1 && fits < info.plan.num_splits) {
      return absl::InvalidArgumentError(
          absl::StrCat("workspace_bytes (", options.workspace_bytes, ") holds ", fits,
                       " splits; num_splits ", info.plan.num_splits, " needs ",
                       DecodeWorkspaceBytes(shape, problem.lengths, info.plan.num_splits)));
    }
    info.plan.num_splits = static_cast<int>(std::clamp<int64_t>(fits, 1, info.plan.num_splits));
  }
  const int64_t base_blocks =
      static_cast<int64_t>(problem.lengths.batch()) * shape.num_kv_heads * info.plan.row_chunks;
  info.plan.blocks = base_blocks * info.plan.num_splits;
  params.num_splits = info.plan.num_splits;
  params.row_chunks = info.plan.row_chunks;
  params.halving_splits = options.halving_splits && params.num_splits > 1;
  info.plan.halving_splits = params.halving_splits;
  const int64_t rows = params.total_q * shape.num_qo_heads;
  if (params.num_splits > 1) {
    params.partial_o = static_cast<float*>(options.workspace);
    params.partial_lse = params.partial_o + params.num_splits * rows * kHeadDim;
  }
  if (info.plan.tensor_cores) {
    RETURN_IF_ERROR(LaunchMmaDecode(
        params,
        {.head_dim = kHeadDim,
         .dtype = shape.dtype,
         .loads = MmaLoadsOf(info.plan.long_tiles, info.plan.tma),
         .num_kv_heads = shape.num_kv_heads,
         .batch = problem.lengths.batch(),
         .cache_slots = problem.buffers.num_pages * shape.page_size},
        stream));
  } else {
    auto* kernel = info.plan.prefetch ? DecodeKernel<T, kHeadDim, kRows, true>
                                      : DecodeKernel<T, kHeadDim, kRows, false>;
    const dim3 grid(params.num_splits, shape.num_kv_heads * info.plan.row_chunks,
                    problem.lengths.batch());
    kernel<<<grid, kDecodeThreads, 0, stream>>>(params);
    CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  if (params.num_splits > 1 && rows > 0) {
    const DecodeMergeParams merge{.partial_o = params.partial_o,
                                  .partial_lse = params.partial_lse,
                                  .o = params.o,
                                  .lse = params.lse,
                                  .rows = rows,
                                  .num_splits = params.num_splits};
    // Launched programmatically dependent where the GPU has it: its blocks are scheduled while
    // the split kernel's last blocks still run, instead of after its end, and wait inside.
    cudaLaunchAttribute overlap;
    overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    overlap.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(static_cast<unsigned>(rows));
    config.blockDim = dim3(kHeadDim / 4);
    config.stream = stream;
    config.attrs = &overlap;
    config.numAttrs = options.overlap_merge && device.compute_major >= 9 ? 1 : 0;
    CUDA_RETURN_IF_ERROR(cudaLaunchKernelEx(&config, DecodeMergeKernel<T, kHeadDim>, merge));
    info.merged = true;
    info.merge_overlapped = config.numAttrs == 1;
  }
  return info;
}

template <typename T, int kHeadDim, int kRows>
absl::StatusOr<DecodeLaunchInfo> LaunchDecodeTyped(const DecodeKernelParams& params,
                                                   const AttentionProblem& problem,
                                                   const DecodeOptions& options,
                                                   cudaStream_t stream) {
  DecodeLaunchInfo info;
  info.threads = kDecodeThreads;
  int plain_blocks_per_sm = 0;
  int prefetch_blocks_per_sm = 0;
  CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &plain_blocks_per_sm, DecodeKernel<T, kHeadDim, kRows, false>, kDecodeThreads, 0));
  CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &prefetch_blocks_per_sm, DecodeKernel<T, kHeadDim, kRows, true>, kDecodeThreads, 0));
  ASSIGN_OR_RETURN(const gpu::DeviceFacts device, gpu::CurrentDeviceFacts());
  const AttentionShape& shape = problem.shape;
  DecodePlanInput input{.batch = problem.lengths.batch(),
                        .num_kv_heads = shape.num_kv_heads,
                        .group_size = shape.group_size(),
                        .max_q_len = problem.lengths.max_q_len(),
                        .max_kv_len = problem.lengths.max_kv_len(),
                        .sm_count = device.sm_count,
                        .blocks_per_sm = plain_blocks_per_sm,
                        .prefetch_blocks_per_sm = prefetch_blocks_per_sm,
                        .requested_splits = options.num_splits};
  const bool forced_tensor_cores = IsTensorCoreDecode(options.kernel);
  RETURN_IF_ERROR(TensorCoreDecodeRefuses(options.kernel, kHeadDim, shape.page_size,
                                          device.compute_major));
  const bool long_tiles = IsLongTileDecode(options.kernel);
  const bool tma = IsTmaDecode(options.kernel);
  const TensorCoreRowLimit row_limit = TensorCoreRowLimitOf(kHeadDim, long_tiles);
  input.tensor_core_max_rows = row_limit.rows_per_block;
  input.tensor_core_max_row_chunks = row_limit.chunks;
  input.tensor_core_rows_at_any_batch = TensorCoreRowsAtAnyBatch(kHeadDim);
  // The tensor-core kernel's residency is measured only where it may run: forced (the plan then
  // refuses rows it cannot hold) or offered to a plan that could pick it.
  int tensor_core_blocks_per_sm = 0;
  if (MmaDecodeSupportsHeadDim(kHeadDim) &&
      (forced_tensor_cores ||
       (options.kernel == DecodeKernelChoice::kAuto && PlanMayUseTensorCores(input)))) {
    ASSIGN_OR_RETURN(tensor_core_blocks_per_sm,
                     MmaDecodeBlocksPerSm(kHeadDim, shape.dtype, MmaLoadsOf(long_tiles, tma)));
  }
  input.tensor_core_blocks_per_sm = tensor_core_blocks_per_sm;
  // A forced kernel is planned alone, with its own residency.
  if (forced_tensor_cores) {
    ASSIGN_OR_RETURN(info.plan, PlanTensorCoreDecode(input));
    info.plan.long_tiles = long_tiles;
    info.plan.tma = tma;
  } else {
    if (options.kernel != DecodeKernelChoice::kAuto) {
      if (options.kernel == DecodeKernelChoice::kPrefetch) {
        input.blocks_per_sm = prefetch_blocks_per_sm;
      }
      input.prefetch_blocks_per_sm = 0;
    }
    ASSIGN_OR_RETURN(info.plan, PlanDecode(input));
  }
  if (options.kernel == DecodeKernelChoice::kPrefetch) info.plan.prefetch = true;
  if (info.plan.tensor_cores) {
    info.blocks_per_sm = tensor_core_blocks_per_sm;
    info.threads = kMmaDecodeThreads;
    return LaunchPlanned<T, kHeadDim, kRows>(params, problem, options, device, info, stream);
  }
  if (options.halving_splits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "halving_splits: only the tensor-core decode kernels split so; the plan chose ",
        info.plan.prefetch ? "prefetch" : "plain", " (force a tensor-core kernel, or split evenly)"));
  }
  info.blocks_per_sm = info.plan.prefetch ? prefetch_blocks_per_sm : plain_blocks_per_sm;
  if (info.plan.rows_per_block != kRows) {
    return absl::InternalError(absl::StrCat("decode plan wants ", info.plan.rows_per_block,
                                            " rows per block, dispatched ", kRows));
  }
  return LaunchPlanned<T, kHeadDim, kRows>(params, problem, options, device, info, stream);
}

template <typename T, int kHeadDim>
absl::StatusOr<DecodeLaunchInfo> LaunchDecodeForHeadDim(const DecodeKernelParams& params,
                                                        const AttentionProblem& problem,
                                                        const DecodeOptions& options,
                                                        cudaStream_t stream) {
  ASSIGN_OR_RETURN(const DecodePlan plan, PlanDecode({.batch = problem.lengths.batch(),
                                                      .num_kv_heads = problem.shape.num_kv_heads,
                                                      .group_size = problem.shape.group_size(),
                                                      .max_q_len = problem.lengths.max_q_len(),
                                                      .max_kv_len = problem.lengths.max_kv_len(),
                                                      .sm_count = 1,
                                                      .blocks_per_sm = 1,
                                                      .requested_splits = 1}));
  static_assert(kMaxDecodeRowsPerBlock == 8, "a rows-per-block count needs its case below");
  switch (plan.rows_per_block) {
    case 1:
      return LaunchDecodeTyped<T, kHeadDim, 1>(params, problem, options, stream);
    case 2:
      return LaunchDecodeTyped<T, kHeadDim, 2>(params, problem, options, stream);
    case 3:
      return LaunchDecodeTyped<T, kHeadDim, 3>(params, problem, options, stream);
    case 4:
      return LaunchDecodeTyped<T, kHeadDim, 4>(params, problem, options, stream);
    case 5:
      return LaunchDecodeTyped<T, kHeadDim, 5>(params, problem, options, stream);
    case 6:
      return LaunchDecodeTyped<T, kHeadDim, 6>(params, problem, options, stream);
    case 7:
      return LaunchDecodeTyped<T, kHeadDim, 7>(params, problem, options, stream);
    case 8:
      return LaunchDecodeTyped<T, kHeadDim, 8>(params, problem, options, stream);
    default:
      return absl::InternalError(
          absl::StrCat("no decode kernel for ", plan.rows_per_block, " rows per block"));
  }
}

template <typename T>
absl::StatusOr<DecodeLaunchInfo> LaunchDecodeForType(const DecodeKernelParams& params,
                                                     const AttentionProblem& problem,
                                                     const DecodeOptions& options,
                                                     cudaStream_t stream) {
  return DispatchHeadDim(problem.shape.head_dim, "decode kernel", [&](auto head_dim) {
    return LaunchDecodeForHeadDim<T, decltype(head_dim)::value>(params, problem, options, stream);
  });
}

}  // namespace

const std::vector<int>& DecodeHeadDims() {
  static const std::vector<int> kDims(std::begin(kAttentionHeadDims),
                                      std::end(kAttentionHeadDims));
  return kDims;
}

std::string_view DecodeKernelChoiceName(DecodeKernelChoice kernel) {
  switch (kernel) {
    case DecodeKernelChoice::kAuto:
      return "auto";
    case DecodeKernelChoice::kPlain:
      return "plain";
    case DecodeKernelChoice::kPrefetch:
      return "prefetch";
    case DecodeKernelChoice::kTensorCores:
      return "tensor_cores";
    case DecodeKernelChoice::kTensorCoresLongTiles:
      return "tensor_cores_32keys";
    case DecodeKernelChoice::kTensorCoresTma:
      return "tensor_cores_tma";
    case DecodeKernelChoice::kTensorCoresLongTilesTma:
      return "tensor_cores_32keys_tma";
  }
  return "unknown";
}

bool IsTensorCoreDecode(DecodeKernelChoice kernel) {
  return kernel == DecodeKernelChoice::kTensorCores || IsLongTileDecode(kernel) ||
         IsTmaDecode(kernel);
}

bool DecodeKernelTakes(DecodeKernelChoice kernel, int head_dim, int page_size, int rows,
                       int compute_major) {
  if (!TensorCoreDecodeRefuses(kernel, head_dim, page_size, compute_major).ok()) return false;
  if (!IsTensorCoreDecode(kernel)) return true;
  const TensorCoreRowLimit limit = TensorCoreRowLimitOf(head_dim, IsLongTileDecode(kernel));
  return rows <= limit.rows_per_block * limit.chunks;
}

size_t DecodeWorkspaceBytes(const AttentionShape& shape, const SequenceLengths& lengths,
                            int num_splits) {
  if (num_splits <= 1) return 0;
  const size_t rows = static_cast<size_t>(lengths.total_q()) * shape.num_qo_heads;
  return static_cast<size_t>(num_splits) * rows * (shape.head_dim + 1) * sizeof(float);
}

std::string DecodeLaunchInfo::ToString() const {
  return absl::StrFormat(
      "splits=%d rows_per_block=%d row_chunks=%d blocks=%d threads=%d "
      "resident_blocks_per_sm=%d prefetch=%s merge=%s%s%s",
      plan.num_splits, plan.rows_per_block, plan.row_chunks, plan.blocks, threads, blocks_per_sm,
      plan.prefetch ? "yes" : "no", merged ? (merge_overlapped ? "overlapped" : "yes") : "no",
      plan.tensor_cores
          ? absl::StrCat(" tensor_cores=yes",
                         plan.long_tiles ? absl::StrCat(" keys_per_tile=", kMmaDecodeLongTileKeys)
                                         : "",
                         plan.tma ? " loads=tma" : "")
          : "",
      plan.halving_splits ? " halving_splits=yes" : "");
}

absl::StatusOr<DecodeLaunchInfo> LaunchDecode(const AttentionProblem& problem,
                                              const DecodeOptions& options, cudaStream_t stream) {
  RETURN_IF_ERROR(ValidateAttentionProblem(problem, DecodeHeadDims()));
  const AttentionShape& shape = problem.shape;
  for (int b = 0; b < problem.lengths.batch(); ++b) {
    const int q = problem.lengths.q_lens[b];
    if (q < 1 || q > kMaxDecodeQLen) {
      return absl::InvalidArgumentError(absl::StrCat("q_lens[", b, "] (", q, ") must be in 1..",
                                                     kMaxDecodeQLen, " for decode; use prefill"));
    }
  }
  if (options.num_splits > 1 && options.workspace == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_splits is ", options.num_splits, " but workspace is null"));
  }
  const AttentionBuffers& b = problem.buffers;
  const DecodeKernelParams params{
      .q = b.q,
      .k_cache = b.k_cache,
      .v_cache = b.v_cache,
      .o = b.o,
      .lse = b.lse,
      .partial_o = nullptr,
      .partial_lse = nullptr,
      .q_indptr = b.q_indptr,
      .kv_lens = b.kv_lens,
      .page_indptr = b.page_indptr,
      .page_indices = b.page_indices,
      .num_qo_heads = shape.num_qo_heads,
      .group_size = shape.group_size(),
      .log2_page_size = std::countr_zero(static_cast<unsigned>(shape.page_size)),
      .num_splits = 1,
      .row_chunks = 1,
      .total_q = problem.lengths.total_q(),
      .kv_row_stride = static_cast<int64_t>(shape.num_kv_heads) * shape.head_dim,
      .scale_log2 = shape.EffectiveScale() * device::kLog2e,
      .causal = shape.causal,
      .halving_splits = false,
  };
  switch (shape.dtype) {
    case AttentionDtype::kBf16:
      return LaunchDecodeForType<__nv_bfloat16>(params, problem, options, stream);
    case AttentionDtype::kFp16:
      return LaunchDecodeForType<__half>(params, problem, options, stream);
    case AttentionDtype::kFp8E4m3:
      return absl::InvalidArgumentError(
          "dtype: got fp8-e4m3; decode takes bf16 or fp16 (fp8 e4m3 runs in the Hopper prefill "
          "only)");
  }
  return absl::InvalidArgumentError("dtype has no decode kernel");
}

}  // namespace gpuprof::attention
