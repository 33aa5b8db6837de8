// The index workload (embedding gather) in the worker: a JIT-specialised kernel, a random
// table and ids, timing by the shared GPU run driver, and a bit-exact check against the CPU
// gather.
#ifndef GPUPROF_WORKLOADS_INDEX_INDEX_RUNNER_H_
#define GPUPROF_WORKLOADS_INDEX_INDEX_RUNNER_H_

#include "absl/status/statusor.h"
#include "gpuprof/v1/experiment.pb.h"
#include "workloads/run_context.h"

namespace gpuprof::workloads {

// Runs assignment.request().index() on the first leased GPU (CUDA device 0).
absl::StatusOr<gpuprof::v1::ExperimentResult> RunIndexWorkload(const RunContext& context);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_INDEX_INDEX_RUNNER_H_
