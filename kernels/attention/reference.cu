// The exact attention the fast kernels are checked against. One block per (token, query head):
// the query row in shared memory as fp32, scores for a chunk of kChunk keys computed by the
// threads side by side, then each thread owns output dimensions and accumulates exp(s - max) * v
// in fp32, rescaling when a later chunk raises the maximum. fp8 inputs are read as stored and
// dequantised by folding q_scale * k_scale into the softmax scale and v_scale into the final
// division (per-tensor scales: the same values up to fp32 rounding).
#include <cuda_runtime.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "kernels/attention/attention_device.cuh"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/head_dims.h"
#include "kernels/attention/reference.h"

namespace gpuprof::attention {
namespace {

inline constexpr int kReferenceThreads = 256;
inline constexpr int kReferenceChunk = 1024;

struct ReferenceKernelParams {
  const void* q;
  const void* k_cache;
  const void* v_cache;
  float* o;
  float* lse;
  const int32_t* q_indptr;
  const int32_t* kv_lens;
  const int32_t* page_indptr;
  const int32_t* page_indices;
  int batch;
  int num_qo_heads;
  int group_size;
  int log2_page_size;
  int64_t kv_row_stride;
  float scale;    // softmax scale x q_scale x k_scale
  float v_scale;  // divides the output by running_sum / v_scale
  bool causal;
};

__device__ float BlockReduce(float value, float* scratch, bool is_max) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = is_max ? fmaxf(value, other) : value + other;
  }
  __syncthreads();  // scratch may still be read from the last call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float result = scratch[0];
  for (int w = 1; w < kReferenceThreads / 32; ++w) {
    result = is_max ? fmaxf(result, scratch[w]) : result + scratch[w];
  }
  return result;
}

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kReferenceThreads)
    ReferenceKernel(const __grid_constant__ ReferenceKernelParams p) {
  static_assert(device::kIsAttentionInputType<T>, "T must be bf16, fp16 or fp8 e4m3");
  static_assert(kHeadDim % 8 == 0 && kHeadDim <= kReferenceThreads, "head_dim <= threads");
  __shared__ float q_row[kHeadDim];
  __shared__ float probs[kReferenceChunk];
  __shared__ float scratch[kReferenceThreads / 32];

  const int token = blockIdx.x;
  const int head = blockIdx.y;
  int seq = 0;
  while (seq + 1 < p.batch && p.q_indptr[seq + 1] <= token) ++seq;
  const int q_start = p.q_indptr[seq];
  const int q_len = p.q_indptr[seq + 1] - q_start;
  const int kv_len = p.kv_lens[seq];
  const int qi = token - q_start;
  const int kv_end = p.causal ? kv_len - q_len + qi + 1 : kv_len;
  const int kv_head = head / p.group_size;
  const int32_t* pages = p.page_indices + p.page_indptr[seq];
  const T* q =
      static_cast<const T*>(p.q) + (static_cast<int64_t>(token) * p.num_qo_heads + head) * kHeadDim;
  for (int d = threadIdx.x; d < kHeadDim; d += kReferenceThreads) {
    q_row[d] = device::ToFloat(q[d]);
  }
  __syncthreads();

  float running_max = -INFINITY;
  float running_sum = 0.0f;
  float acc = 0.0f;  // output dimension threadIdx.x
  for (int chunk = 0; chunk < kv_end; chunk += kReferenceChunk) {
    const int n = min(kReferenceChunk, kv_end - chunk);
    float local_max = -INFINITY;
    for (int i = threadIdx.x; i < n; i += kReferenceThreads) {
      const T* k = static_cast<const T*>(p.k_cache) +
                   device::PagedRow(pages, chunk + i, p.log2_page_size) * p.kv_row_stride +
                   kv_head * kHeadDim;
      float dot = 0.0f;
      for (int d = 0; d < kHeadDim; ++d) dot = fmaf(q_row[d], device::ToFloat(k[d]), dot);
      probs[i] = dot * p.scale;
      local_max = fmaxf(local_max, probs[i]);
    }
    const float chunk_max = BlockReduce(local_max, scratch, true);
    const float new_max = fmaxf(running_max, chunk_max);
    float local_sum = 0.0f;
    for (int i = threadIdx.x; i < n; i += kReferenceThreads) {
      probs[i] = expf(probs[i] - new_max);
      local_sum += probs[i];
    }
    const float chunk_sum = BlockReduce(local_sum, scratch, false);  // also orders probs[]
    const float correction = expf(running_max - new_max);
    running_sum = running_sum * correction + chunk_sum;
    running_max = new_max;
    if (threadIdx.x < kHeadDim) {
      acc *= correction;
      for (int i = 0; i < n; ++i) {
        const T* v = static_cast<const T*>(p.v_cache) +
                     device::PagedRow(pages, chunk + i, p.log2_page_size) * p.kv_row_stride +
                     kv_head * kHeadDim;
        acc = fmaf(probs[i], device::ToFloat(v[threadIdx.x]), acc);
      }
    }
    __syncthreads();  // probs[] is rewritten by the next chunk
  }
  const int64_t token_head = static_cast<int64_t>(token) * p.num_qo_heads + head;
  if (threadIdx.x < kHeadDim) {
    p.o[token_head * kHeadDim + threadIdx.x] = acc / (running_sum / p.v_scale);
  }
  if (p.lse != nullptr && threadIdx.x == 0) p.lse[token_head] = running_max + logf(running_sum);
}

template <typename T>
absl::Status LaunchReferenceForType(const ReferenceKernelParams& params, int head_dim, dim3 grid,
                                    cudaStream_t stream) {
  return DispatchHeadDim(head_dim, "reference kernel", [&](auto dim) -> absl::Status {
    ReferenceKernel<T, decltype(dim)::value><<<grid, kReferenceThreads, 0, stream>>>(params);
    CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
}

}  // namespace

const std::vector<int>& ReferenceHeadDims() {
  static const std::vector<int> kDims = {64, 128, 256};
  return kDims;
}

absl::Status LaunchReferenceAttention(const AttentionProblem& problem, cudaStream_t stream) {
  RETURN_IF_ERROR(ValidateAttentionProblem(problem, ReferenceHeadDims()));
  const AttentionShape& shape = problem.shape;
  const int64_t total_q = problem.lengths.total_q();
  if (total_q == 0) return absl::OkStatus();
  if (total_q > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("total_q (", total_q, ") is too large"));
  }
  const AttentionBuffers& b = problem.buffers;
  const ReferenceKernelParams params{
      .q = b.q,
      .k_cache = b.k_cache,
      .v_cache = b.v_cache,
      .o = static_cast<float*>(b.o),
      .lse = b.lse,
      .q_indptr = b.q_indptr,
      .kv_lens = b.kv_lens,
      .page_indptr = b.page_indptr,
      .page_indices = b.page_indices,
      .batch = problem.lengths.batch(),
      .num_qo_heads = shape.num_qo_heads,
      .group_size = shape.group_size(),
      .log2_page_size = std::countr_zero(static_cast<unsigned>(shape.page_size)),
      .kv_row_stride = static_cast<int64_t>(shape.num_kv_heads) * shape.head_dim,
      .scale = shape.EffectiveScale() * shape.q_scale * shape.k_scale,
      .v_scale = shape.v_scale,
      .causal = shape.causal,
  };
  const dim3 grid(static_cast<unsigned>(total_q), shape.num_qo_heads);
  switch (shape.dtype) {
    case AttentionDtype::kBf16:
      return LaunchReferenceForType<__nv_bfloat16>(params, shape.head_dim, grid, stream);
    case AttentionDtype::kFp16:
      return LaunchReferenceForType<__half>(params, shape.head_dim, grid, stream);
    case AttentionDtype::kFp8E4m3:
      return LaunchReferenceForType<__nv_fp8_e4m3>(params, shape.head_dim, grid, stream);
  }
  return absl::InvalidArgumentError("dtype has no reference kernel");
}

}  // namespace gpuprof::attention
