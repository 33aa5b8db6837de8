// The workloads this build of the worker runs, one line each (runner_table.cc).
#ifndef GPUPROF_WORKLOADS_RUNNER_TABLE_H_
#define GPUPROF_WORKLOADS_RUNNER_TABLE_H_

#include <string>
#include <vector>

#include "gpuprof/v1/experiment.pb.h"
#include "workloads/run_context.h"

namespace gpuprof::workloads {

struct WorkloadRunner {
  gpuprof::v1::ExperimentRequest::WorkloadCase request_case;
  RunWorkloadFunction run;
};

// nullptr for a workload this worker cannot run.
const WorkloadRunner* FindWorkloadRunner(gpuprof::v1::ExperimentRequest::WorkloadCase request_case);

// The names of the workloads the worker runs, for ListGpus' supported_workloads.
std::vector<std::string> RunnableWorkloadNames();

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_RUNNER_TABLE_H_
