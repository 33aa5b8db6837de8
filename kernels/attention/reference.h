// A plain, exact attention over the same paged layout, to check the fast kernels: one block per
// (query row, query head), scores and accumulation in fp32, expf rather than the fast 2^x. Slow
// (it reads K and V once per query row and head); meant for test-sized shapes.
#ifndef GPUPROF_KERNELS_ATTENTION_REFERENCE_H_
#define GPUPROF_KERNELS_ATTENTION_REFERENCE_H_

#include <cuda_runtime_api.h>

#include <vector>

#include "absl/status/status.h"
#include "kernels/attention/attention_params.h"

namespace gpuprof::attention {

const std::vector<int>& ReferenceHeadDims();

// Like LaunchPrefill, except that buffers.o is fp32 [total_q, num_qo_heads, head_dim] and
// buffers.lse, when set, receives the natural-log LSE. Any q_len <= kv_len (causal) or any
// q_len (not causal). bf16, fp16 and fp8 e4m3 inputs (fp8 dequantised with shape.q_scale,
// k_scale and v_scale).
absl::Status LaunchReferenceAttention(const AttentionProblem& problem, cudaStream_t stream);

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_REFERENCE_H_
