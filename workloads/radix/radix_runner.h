// The radix workload in the worker: replays the generated request stream against the radix
// prefix cache (radix/) on the CPU and reports hit rate and the cost of each operation.
#ifndef GPUPROF_WORKLOADS_RADIX_RADIX_RUNNER_H_
#define GPUPROF_WORKLOADS_RADIX_RADIX_RUNNER_H_

#include "absl/status/statusor.h"
#include "gpuprof/v1/experiment.pb.h"
#include "workloads/run_context.h"

namespace gpuprof::workloads {

absl::StatusOr<gpuprof::v1::ExperimentResult> RunRadixWorkload(const RunContext& context);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_RADIX_RADIX_RUNNER_H_
