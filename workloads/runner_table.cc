#include "workloads/runner_table.h"

#include "workloads/attention/attention_runner.h"
#include "workloads/collective/collective_runner.h"
#include "workloads/copy/copy_runner.h"
#include "workloads/custom_kernel/index_contract_plan.h"
#include "workloads/custom_kernel/store_contract_plan.h"
#include "workloads/index/index_runner.h"
#include "workloads/radix/radix_runner.h"
#include "workloads/spec_table.h"
#include "workloads/store/store_runner.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

// A workload with a contract for submitted kernels: ours, or the request's own kernel.
template <RunWorkloadFunction kOurs, RunWorkloadFunction kCustom>
absl::StatusOr<v1::ExperimentResult> OursOrCustom(const RunContext& context) {
  return context.assignment.request().has_custom_kernel() ? kCustom(context) : kOurs(context);
}

// One line per workload the worker runs.
constexpr WorkloadRunner kRunners[] = {
    {v1::ExperimentRequest::kIndex, &OursOrCustom<&RunIndexWorkload, &RunIndexContractWorkload>},
    {v1::ExperimentRequest::kStore, &OursOrCustom<&RunStoreWorkload, &RunStoreContractWorkload>},
    {v1::ExperimentRequest::kRadix, &RunRadixWorkload},
    {v1::ExperimentRequest::kCollective, &RunCollectiveWorkload},
    {v1::ExperimentRequest::kAttention, &RunAttentionWorkload},
    {v1::ExperimentRequest::kCopy, &RunCopyWorkload},
};

}  // namespace

const WorkloadRunner* FindWorkloadRunner(v1::ExperimentRequest::WorkloadCase request_case) {
  for (const WorkloadRunner& runner : kRunners) {
    if (runner.request_case == request_case) return &runner;
  }
  return nullptr;
}

std::vector<std::string> RunnableWorkloadNames() {
  std::vector<std::string> names;
  for (const WorkloadRunner& runner : kRunners) {
    names.push_back(WorkloadName(runner.request_case));
  }
  return names;
}

}  // namespace gpuprof::workloads
