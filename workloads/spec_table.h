// Every workload the API knows, one line each (spec_table.cc), and what the daemon asks of a
// request through them.
#ifndef GPUPROF_WORKLOADS_SPEC_TABLE_H_
#define GPUPROF_WORKLOADS_SPEC_TABLE_H_

#include <optional>
#include <string>

#include "absl/types/span.h"
#include "gpuprof/v1/experiment.pb.h"
#include "workloads/headline.h"
#include "workloads/workload_spec.h"

namespace gpuprof::workloads {

absl::Span<const WorkloadSpec* const> WorkloadSpecs();

// nullptr when no workload is set (or the case is unknown to this build).
const WorkloadSpec* FindWorkloadSpec(gpuprof::v1::ExperimentRequest::WorkloadCase request_case);
const WorkloadSpec* FindWorkloadSpec(gpuprof::v1::Workload workload);

// "index", "store", ... as users type them (the oneof field's name); "" when none is set.
std::string WorkloadName(const gpuprof::v1::ExperimentRequest& request);
std::string WorkloadName(gpuprof::v1::ExperimentRequest::WorkloadCase request_case);
gpuprof::v1::Workload WorkloadOf(const gpuprof::v1::ExperimentRequest& request);
bool IsGpuWorkload(const gpuprof::v1::ExperimentRequest& request);
// The number of GPUs the request needs once defaults are applied.
int RequiredGpuCount(const gpuprof::v1::ExperimentRequest& request);
// The same for a request whose spec the caller has already looked up.
int RequiredGpuCount(const WorkloadSpec& spec, const gpuprof::v1::ExperimentRequest& request);

// The experiment's headline, as its workload's spec chooses it (by the result's type for a
// workload this build does not know); nullopt without a result that has one.
std::optional<Headline> HeadlineOf(const gpuprof::v1::Experiment& experiment);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_SPEC_TABLE_H_
