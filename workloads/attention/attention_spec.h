// The attention workload's spec: prefill and decode attention over a paged KV cache. CUDA-free; the daemon links it.
#ifndef GPUPROF_WORKLOADS_ATTENTION_ATTENTION_SPEC_H_
#define GPUPROF_WORKLOADS_ATTENTION_ATTENTION_SPEC_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "gpuprof/v1/workloads.pb.h"
#include "workloads/workload_spec.h"

namespace gpuprof::workloads {

extern const WorkloadSpec kAttentionSpec;

// Each sequence's query and cached lengths, from the lists, the distribution or the uniform
// q_len / kv_len of a spec with its defaults applied.
struct AttentionLengths {
  std::vector<int64_t> q_lens;
  std::vector<int64_t> kv_lens;
};
AttentionLengths ExpandAttentionLengths(const v1::AttentionSpec& spec);

// FAILED_PRECONDITION, naming the field, when inputs of `dtype` cannot run on a GPU of compute
// capability major.minor: fp8 e4m3 runs only on 9.0 (H100, H200), as its one kernel is sm_90a
// code. The runner asks before any GPU work.
absl::Status CheckAttentionDtypeRunsOn(v1::DataType dtype, int compute_major, int compute_minor);

// Its headline: decode is bandwidth-bound (GB/s, % of copy), prefill compute-bound (TFLOP/s,
// % of peak).
std::optional<Headline> AttentionHeadline(const v1::Experiment& experiment);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_ATTENTION_ATTENTION_SPEC_H_
