// The store workload (KV-cache scatter) in the worker: JIT-specialised kernel (fused K+V or
// two launches), slots in the requested pattern and page size, timing by the measurement
// core, and a bit-exact check of the whole cache against the CPU scatter.
#ifndef GPUPROF_DAEMON_WORKER_STORE_RUNNER_H_
#define GPUPROF_DAEMON_WORKER_STORE_RUNNER_H_

#include "absl/status/statusor.h"
#include "daemon/worker/gpu_measurement.h"
#include "daemon/worker/tracing_session.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/worker/v1/worker.pb.h"

namespace gpuprof::worker {

// Runs run.request().store() on the first leased GPU (CUDA device 0); see RunIndexWorkload.
// With `tracing`, the kernel is also run once under its hardware-metric collection (tracing
// levels METRICS and FULL), outside the timed samples.
absl::StatusOr<gpuprof::v1::ExperimentResult> RunStoreWorkload(const v1::RunExperiment& run,
                                                               const PhaseProgress& progress,
                                                               TracingSession* tracing = nullptr);

}  // namespace gpuprof::worker

#endif  // GPUPROF_DAEMON_WORKER_STORE_RUNNER_H_
