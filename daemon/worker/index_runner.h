// The index workload (embedding gather) in the worker: JIT-specialised kernel, random table
// and ids, timing by the measurement core, and a bit-exact check against the CPU gather.
#ifndef GPUPROF_DAEMON_WORKER_INDEX_RUNNER_H_
#define GPUPROF_DAEMON_WORKER_INDEX_RUNNER_H_

#include "absl/status/statusor.h"
#include "daemon/worker/gpu_measurement.h"
#include "daemon/worker/tracing_session.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/worker/v1/worker.pb.h"

namespace gpuprof::worker {

// Runs run.request().index() on the first leased GPU (CUDA device 0). Fills measurement,
// verification, jit, kernel_config and not_collected; the caller adds provenance. A failed
// CUDA call comes back as a status carrying its cudaError_t (see common/cuda_status.h).
// With `tracing`, the kernel is also run once under its hardware-metric collection (tracing
// levels METRICS and FULL), outside the timed samples.
absl::StatusOr<gpuprof::v1::ExperimentResult> RunIndexWorkload(const v1::RunExperiment& run,
                                                               const PhaseProgress& progress,
                                                               TracingSession* tracing = nullptr);

}  // namespace gpuprof::worker

#endif  // GPUPROF_DAEMON_WORKER_INDEX_RUNNER_H_
