// The store contract (gpuprof_store_params): a submitted KV-cache scatter kernel (K and V in
// one launch) run, checked and timed on the request's StoreSpec shape, against the same
// reference and byte count as ours.
#ifndef GPUPROF_WORKLOADS_CUSTOM_KERNEL_STORE_CONTRACT_PLAN_H_
#define GPUPROF_WORKLOADS_CUSTOM_KERNEL_STORE_CONTRACT_PLAN_H_

#include "absl/status/statusor.h"
#include "gpuprof/v1/experiment.pb.h"
#include "workloads/run_context.h"

namespace gpuprof::workloads {

// Runs request.custom_kernel() under the store contract on the first leased GPU.
absl::StatusOr<gpuprof::v1::ExperimentResult> RunStoreContractWorkload(const RunContext& context);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_CUSTOM_KERNEL_STORE_CONTRACT_PLAN_H_
