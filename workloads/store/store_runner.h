// The store workload (KV-cache scatter) in the worker: a JIT-specialised kernel (fused K+V or
// two launches), slots in the requested pattern and page size, timing by the shared GPU run
// driver, and a bit-exact check of the whole cache against the CPU scatter.
#ifndef GPUPROF_WORKLOADS_STORE_STORE_RUNNER_H_
#define GPUPROF_WORKLOADS_STORE_STORE_RUNNER_H_

#include "absl/status/statusor.h"
#include "gpuprof/v1/experiment.pb.h"
#include "workloads/run_context.h"

namespace gpuprof::workloads {

// Runs assignment.request().store() on the first leased GPU (CUDA device 0).
absl::StatusOr<gpuprof::v1::ExperimentResult> RunStoreWorkload(const RunContext& context);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_STORE_STORE_RUNNER_H_
