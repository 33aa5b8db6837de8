#include "workloads/radix/radix_runner.h"

#include "radix/radix_workload.h"
#include "workloads/radix/radix_spec.h"

namespace gpuprof::workloads {

absl::StatusOr<v1::ExperimentResult> RunRadixWorkload(const RunContext& context) {
  const radix::RadixWorkloadConfig config =
      RadixConfigFromSpec(context.assignment.request().radix());
  context.progress(v1::PHASE_TIMED, 0, config.stream.num_requests, "replaying requests");
  const radix::RadixWorkloadReport report =
      radix::RunRadixWorkload(config, [&](int64_t done, int64_t total) {
        context.progress(v1::PHASE_TIMED, done, total, "replaying requests");
      });
  if (!report.error.empty()) return absl::InternalError(report.error);
  v1::ExperimentResult result;
  *result.mutable_radix() = RadixResultFromReport(report);
  return result;
}

}  // namespace gpuprof::workloads
