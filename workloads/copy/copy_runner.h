// The copy workload in the worker: the routes of copy_routes.h timed by the measurement core
// on the copy engines (cudaMemcpyAsync, cudaMemcpyPeerAsync), several legs at once on their
// own streams; pageable copies, which wait for their stream, timed on the host clock. Every
// route's destination is then checked byte for byte against its source's pattern.
#ifndef GPUPROF_WORKLOADS_COPY_COPY_RUNNER_H_
#define GPUPROF_WORKLOADS_COPY_COPY_RUNNER_H_

#include "absl/status/statusor.h"
#include "gpuprof/v1/experiment.pb.h"
#include "workloads/run_context.h"

namespace gpuprof::workloads {

// Runs assignment.request().copy() on every leased GPU (CUDA devices 0..n-1).
absl::StatusOr<gpuprof::v1::ExperimentResult> RunCopyWorkload(const RunContext& context);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_COPY_COPY_RUNNER_H_
