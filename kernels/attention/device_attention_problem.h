// Random inputs in a paged layout on the device, owned by RAII buffers, and copies back to
// fp32 on the host: what the attention runner, the GPU tests and the benchmark run on.
#ifndef GPUPROF_KERNELS_ATTENTION_DEVICE_ATTENTION_PROBLEM_H_
#define GPUPROF_KERNELS_ATTENTION_DEVICE_ATTENTION_PROBLEM_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cuda_raii.h"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/paged_layout.h"
#include "kernels/attention/prefill.h"

namespace gpuprof::attention {

// One attention problem with its device memory: Q, the K/V caches, the index arrays, an output
// in OutputDtype(dtype) and an fp32 output for the reference, both LSEs, and the prefill's
// workspace (zeroed; where a query is longer than one token).
struct DeviceAttentionProblem {
  AttentionProblem problem;  // buffers point at the members below; o/lse at `out`/`out_lse`
  PagedLayout layout;
  DeviceBuffer q, k_cache, v_cache, q_indptr, kv_lens, page_indptr, page_indices;
  DeviceBuffer out, out_lse, ref_out, ref_lse;
  DeviceBuffer prefill_workspace;

  // The problem with o/lse pointing at the fp32 reference outputs.
  AttentionProblem ReferenceProblem() const;
  // What LaunchPrefill takes as its workspace (empty where none was allocated).
  PrefillWorkspace PrefillScratch() const {
    return {.data = prefill_workspace.data(), .bytes = prefill_workspace.bytes()};
  }
};

// Inputs uniform in [-q_range, q_range] (Q) and [-1, 1] (K, V), drawn with `seed` (beyond 4M
// elements a tensor repeats its first 4M); pages shuffled with the same seed
// (layout.page_indices is a permutation). fp8 e4m3 inputs store the nearest e4m3 of
// value / scale, scale = range / kFp8StoredMax per tensor, and problem.shape's q_scale, k_scale
// and v_scale are set to those scales. Outputs are poisoned with NaN (0xFF bytes) so that an
// unwritten element fails the comparison.
// The largest magnitude an fp8 input stores: the range's end maps to it, with headroom under
// e4m3's largest finite value (448).
inline constexpr float kFp8StoredMax = 240.0f;

absl::StatusOr<DeviceAttentionProblem> MakeDeviceAttentionProblem(const AttentionShape& shape,
                                                                  SequenceLengths lengths,
                                                                  uint64_t seed,
                                                                  float q_range = 2.0f);

// Fills `buffer` with 0xFF bytes (NaN in bf16, fp16, fp8 e4m3 and fp32).
absl::Status PoisonBuffer(const DeviceBuffer& buffer, cudaStream_t stream);

// Copies `count` elements of `dtype` (or fp32 when `is_fp32`) back as floats, as stored (fp8
// is not multiplied by its scale). An output is in OutputDtype(shape.dtype), not shape.dtype.
absl::StatusOr<std::vector<float>> DownloadAsFloat(const void* device, int64_t count,
                                                   AttentionDtype dtype, bool is_fp32);

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_DEVICE_ATTENTION_PROBLEM_H_
