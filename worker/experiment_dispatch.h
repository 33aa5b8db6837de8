// Runs one experiment inside the worker process: finds its runner in the workload table,
// wraps GPU workloads in CUPTI tracing, adds provenance and reports every event.
#ifndef GPUPROF_WORKER_EXPERIMENT_DISPATCH_H_
#define GPUPROF_WORKER_EXPERIMENT_DISPATCH_H_

#include <functional>

#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/worker_protocol/worker_protocol.pb.h"

namespace gpuprof::worker {

// Sends progress, activity and result events towards the daemon.
// The worker's end of its report pipe (gpuprofd passes it as fd 4).
inline constexpr int kReportFd = 4;

using EventEmitter = std::function<void(const ::gpuprof::v1::ExperimentEvent&)>;

// Runs `assignment` to the end. The returned RunFinished says whether it succeeded and whether
// this process may be reused (not after a CUDA error).
worker_protocol::RunFinished RunExperiment(const worker_protocol::ExperimentAssignment& assignment,
                                           const EventEmitter& emit);

}  // namespace gpuprof::worker

#endif  // GPUPROF_WORKER_EXPERIMENT_DISPATCH_H_
