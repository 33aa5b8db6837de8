// The index contract (gpuprof_index_params): a submitted gather kernel run, checked and timed
// on the request's IndexSpec shape, against the same reference and byte count as ours.
#ifndef GPUPROF_WORKLOADS_CUSTOM_KERNEL_INDEX_CONTRACT_PLAN_H_
#define GPUPROF_WORKLOADS_CUSTOM_KERNEL_INDEX_CONTRACT_PLAN_H_

#include "absl/status/statusor.h"
#include "gpuprof/v1/experiment.pb.h"
#include "workloads/run_context.h"

namespace gpuprof::workloads {

// Runs request.custom_kernel() under the index contract on the first leased GPU.
absl::StatusOr<gpuprof::v1::ExperimentResult> RunIndexContractWorkload(const RunContext& context);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_CUSTOM_KERNEL_INDEX_CONTRACT_PLAN_H_
