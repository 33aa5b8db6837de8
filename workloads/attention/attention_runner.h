// The attention workload in the worker: our prefill (FlashAttention-2 style, tensor cores) or
// paged decode (split-K with a merge) kernels, or the exact reference kernel, over a paged KV
// cache of random inputs, timed by the shared GPU run driver and checked against the fp32
// reference computed on the GPU.
#ifndef GPUPROF_WORKLOADS_ATTENTION_ATTENTION_RUNNER_H_
#define GPUPROF_WORKLOADS_ATTENTION_ATTENTION_RUNNER_H_

#include "absl/status/statusor.h"
#include "gpuprof/v1/experiment.pb.h"
#include "workloads/run_context.h"

namespace gpuprof::workloads {

// Runs assignment.request().attention() on the first leased GPU (CUDA device 0).
absl::StatusOr<gpuprof::v1::ExperimentResult> RunAttentionWorkload(const RunContext& context);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_ATTENTION_ATTENTION_RUNNER_H_
