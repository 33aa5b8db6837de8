#include "workloads/runner_table.h"

#include "workloads/attention/attention_runner.h"
#include "workloads/collective/collective_runner.h"
#include "workloads/copy/copy_runner.h"
#include "workloads/custom_kernel/decode_contract_plan.h"
#include "workloads/custom_kernel/index_contract_plan.h"
#include "workloads/custom_kernel/sanitizer_run.h"
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
  if (!context.assignment.request().has_custom_kernel()) return kOurs(context);
  // MODE_SANITIZE re-runs this worker under compute-sanitizer, whose child runs kCustom.
  if (context.assignment.request().custom_kernel().mode() == v1::CustomKernel::MODE_SANITIZE) {
    return RunCustomKernelUnderSanitizer(context);
  }
  return kCustom(context);
}

// One line per workload the worker runs.
constexpr WorkloadRunner kRunners[] = {
    {v1::ExperimentRequest::kIndex, &OursOrCustom<&RunIndexWorkload, &RunIndexContractWorkload>},
    {v1::ExperimentRequest::kStore, &OursOrCustom<&RunStoreWorkload, &RunStoreContractWorkload>},
    {v1::ExperimentRequest::kRadix, &RunRadixWorkload},
    {v1::ExperimentRequest::kCollective, &RunCollectiveWorkload},
    {v1::ExperimentRequest::kAttention,
     &OursOrCustom<&RunAttentionWorkload, &RunDecodeContractWorkload>},
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
