// The collective workload in one rank's worker: NCCL collectives across the experiment's GPUs
// (one worker process per rank, joined through the id rank 0 made), a size sweep, every size
// checked for exact results and timed by the measurement core, the ranks' timings agreed over
// NCCL, and algbw / busbw as nccl-tests defines them.
#ifndef GPUPROF_WORKLOADS_COLLECTIVE_COLLECTIVE_RUNNER_H_
#define GPUPROF_WORKLOADS_COLLECTIVE_COLLECTIVE_RUNNER_H_

#include "absl/status/statusor.h"
#include "gpuprof/v1/experiment.pb.h"
#include "workloads/run_context.h"

namespace gpuprof::workloads {

// Runs assignment.request().collective() as rank assignment.rank() of
// assignment.world_size() on this worker's GPU (CUDA device 0). Keeps the communicator for
// the group's next experiment (assignment.reuse_communicator).
absl::StatusOr<gpuprof::v1::ExperimentResult> RunCollectiveWorkload(const RunContext& context);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_COLLECTIVE_COLLECTIVE_RUNNER_H_
