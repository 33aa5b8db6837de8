// Runs one experiment inside the worker process and reports its events. One function per
// workload; the GPU workloads join here as they are built.
#ifndef GPUPROF_DAEMON_WORKER_EXPERIMENT_RUNNER_H_
#define GPUPROF_DAEMON_WORKER_EXPERIMENT_RUNNER_H_

#include <functional>
#include <string>
#include <vector>

#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/worker/v1/worker.pb.h"

namespace gpuprof::worker {

// Sends progress, activity and result events towards the daemon.
using EventEmitter = std::function<void(const ::gpuprof::v1::ExperimentEvent&)>;

// The workloads this build of the worker can run, by API name.
std::vector<std::string> SupportedWorkloads();

// Runs `run` to the end. The returned RunFinished says whether it succeeded and whether this
// process may be reused (not after a CUDA error).
v1::RunFinished RunExperiment(const v1::RunExperiment& run, const EventEmitter& emit);

}  // namespace gpuprof::worker

#endif  // GPUPROF_DAEMON_WORKER_EXPERIMENT_RUNNER_H_
