#include "workloads/spec_table.h"

#include <algorithm>

#include "workloads/attention/attention_spec.h"
#include "workloads/collective/collective_spec.h"
#include "workloads/copy/copy_spec.h"
#include "workloads/index/index_spec.h"
#include "workloads/radix/radix_spec.h"
#include "workloads/store/store_spec.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

// One line per workload.
constexpr const WorkloadSpec* kSpecs[] = {
    &kIndexSpec, &kStoreSpec, &kAttentionSpec, &kCollectiveSpec, &kRadixSpec, &kCopySpec,
};

}  // namespace

HostLimits HostLimitsOf(const v1::ListGpusResponse& inventory) {
  HostLimits limits;
  limits.gpu_count = inventory.gpus_size();
  limits.nccl_version = inventory.host().nccl_version();
  for (const auto& gpu : inventory.gpus()) {
    if (limits.smallest_gpu_memory_bytes == 0 ||
        gpu.total_memory_bytes() < limits.smallest_gpu_memory_bytes) {
      limits.smallest_gpu_memory_bytes = gpu.total_memory_bytes();
    }
  }
  return limits;
}

absl::Span<const WorkloadSpec* const> WorkloadSpecs() { return kSpecs; }

const WorkloadSpec* FindWorkloadSpec(v1::ExperimentRequest::WorkloadCase request_case) {
  for (const WorkloadSpec* spec : kSpecs) {
    if (spec->request_case == request_case) return spec;
  }
  return nullptr;
}

const WorkloadSpec* FindWorkloadSpec(v1::Workload workload) {
  for (const WorkloadSpec* spec : kSpecs) {
    if (spec->workload == workload) return spec;
  }
  return nullptr;
}

std::string WorkloadName(v1::ExperimentRequest::WorkloadCase request_case) {
  if (request_case == v1::ExperimentRequest::WORKLOAD_NOT_SET) return "";
  const auto* field =
      v1::ExperimentRequest::descriptor()->FindFieldByNumber(static_cast<int>(request_case));
  return field == nullptr ? "" : field->name();
}

std::string WorkloadName(const v1::ExperimentRequest& request) {
  return WorkloadName(request.workload_case());
}

v1::Workload WorkloadOf(const v1::ExperimentRequest& request) {
  const WorkloadSpec* spec = FindWorkloadSpec(request.workload_case());
  return spec == nullptr ? v1::WORKLOAD_UNSPECIFIED : spec->workload;
}

bool IsGpuWorkload(const v1::ExperimentRequest& request) {
  const WorkloadSpec* spec = FindWorkloadSpec(request.workload_case());
  return spec != nullptr && spec->uses_gpu;
}

int RequiredGpuCount(const v1::ExperimentRequest& request) {
  const WorkloadSpec* spec = FindWorkloadSpec(request.workload_case());
  return spec == nullptr ? 0 : RequiredGpuCount(*spec, request);
}

int RequiredGpuCount(const WorkloadSpec& spec, const v1::ExperimentRequest& request) {
  if (!spec.uses_gpu) return 0;
  if (request.gpus().gpu_ids_size() > 0) return request.gpus().gpu_ids_size();
  if (request.gpus().gpu_count() > 0) return request.gpus().gpu_count();
  return std::max(1, request.tp_degree());
}

std::optional<Headline> HeadlineOf(const v1::Experiment& experiment) {
  if (!experiment.has_result()) return std::nullopt;
  const WorkloadSpec* spec = FindWorkloadSpec(experiment.workload());
  if (spec == nullptr) spec = FindWorkloadSpec(experiment.request().workload_case());
  if (spec == nullptr || spec->headline == nullptr) return HeadlineByResultType(experiment);
  return spec->headline(experiment);
}

}  // namespace gpuprof::workloads
