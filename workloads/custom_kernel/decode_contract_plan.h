// The attention decode contract (gpuprof_decode_params): a submitted paged decode kernel run,
// checked and timed on the request's AttentionSpec shape (phase decode, one query token per
// sequence), on inputs made as ours are (DeviceAttentionProblem), against our exact fp32
// attention with our decode's tolerances, and counted in FLOPs and bytes as our decode is.
#ifndef GPUPROF_WORKLOADS_CUSTOM_KERNEL_DECODE_CONTRACT_PLAN_H_
#define GPUPROF_WORKLOADS_CUSTOM_KERNEL_DECODE_CONTRACT_PLAN_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpuprof/v1/experiment.pb.h"
#include "workloads/run_context.h"

namespace gpuprof::workloads {

// Runs request.custom_kernel() under the decode contract on the first leased GPU.
absl::StatusOr<gpuprof::v1::ExperimentResult> RunDecodeContractWorkload(const RunContext& context);

// Why the contract cannot run `request` (prefill, several query tokens per sequence, tensor
// parallelism, another backend), naming the field; OK when it can. CUDA-free.
absl::Status CheckDecodeContractRequest(const gpuprof::v1::ExperimentRequest& request);

// Where element `index` of o [batch, num_qo_heads, head_dim] sits, as a mismatch names it:
// "sequence 3, head 7, element 12".
std::string DecodeOutputElementName(int64_t index, int num_qo_heads, int head_dim);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_CUSTOM_KERNEL_DECODE_CONTRACT_PLAN_H_
