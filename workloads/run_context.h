// What a workload's runner is given in the worker: the assignment (request, leased GPUs, host),
// a progress reporter, and CUPTI tracing for GPU workloads.
#ifndef GPUPROF_WORKLOADS_RUN_CONTEXT_H_
#define GPUPROF_WORKLOADS_RUN_CONTEXT_H_

#include "absl/status/statusor.h"
#include "cupti/tracing_session.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/worker_protocol/worker_protocol.pb.h"
#include "measure/timing_loop.h"

namespace gpuprof::workloads {

struct RunContext {
  const gpuprof::worker_protocol::ExperimentAssignment& assignment;
  // Reports a phase's progress; for GPU workloads it also marks the phase in the trace.
  measure::PhaseProgress progress;
  // Set for GPU workloads; nullptr for CPU ones.
  cupti::TracingSession* tracing = nullptr;
};

// Runs one experiment and returns its result without provenance (the dispatcher adds it). A
// failed CUDA call comes back as a status carrying its cudaError_t (common/cuda_status.h).
using RunWorkloadFunction =
    absl::StatusOr<gpuprof::v1::ExperimentResult> (*)(const RunContext& context);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_RUN_CONTEXT_H_
