#include "workloads/radix/radix_runner.h"

#include "absl/strings/str_format.h"
#include "measure/host_cpu_load.h"
#include "radix/radix_workload.h"
#include "workloads/radix/radix_spec.h"

namespace gpuprof::workloads {

absl::StatusOr<v1::ExperimentResult> RunRadixWorkload(const RunContext& context) {
  const v1::ExperimentRequest& request = context.assignment.request();
  radix::RadixWorkloadConfig config = RadixConfigFromSpec(request.radix());
  config.passes = RadixPassConfigFromOptions(request.measurement());
  const v1::Phase first_phase = config.passes.warmup_passes > 0 ? v1::PHASE_WARMUP
                                                                : v1::PHASE_TIMED;
  context.progress(first_phase, 0, config.stream.num_requests, "replaying requests");
  const measure::HostCpuLoadWindow host_load;
  const radix::RadixWorkloadReport report =
      radix::RunRadixWorkload(config, [&](const radix::PassProgress& pass) {
        context.progress(pass.warmup ? v1::PHASE_WARMUP : v1::PHASE_TIMED, pass.done, pass.total,
                         absl::StrFormat("%s pass %d: replaying requests",
                                         pass.warmup ? "warm-up" : "timed", pass.pass));
      });
  if (!report.error.empty()) return absl::InternalError(report.error);
  v1::ExperimentResult result;
  *result.mutable_radix() = RadixResultFromReport(report);
  if (const std::optional<measure::HostCpuLoad> load = host_load.Stop(); load.has_value()) {
    result.mutable_radix()->set_other_cpus(load->other_cpus);
    result.mutable_radix()->set_online_cpus(load->online_cpus);
  }
  return result;
}

}  // namespace gpuprof::workloads
