// The bridge between the API's RadixSpec / RadixResult and the radix library, shared by the
// daemon (defaults, validation) and the worker (running it), so both agree on one config.
#ifndef GPUPROF_DAEMON_RADIX_SPEC_H_
#define GPUPROF_DAEMON_RADIX_SPEC_H_

#include "absl/status/status.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/workloads.pb.h"
#include "radix/radix_workload.h"

namespace gpuprof::daemon {

// Fills unset fields from radix::RadixWorkloadConfig's defaults.
void ApplyRadixDefaults(v1::RadixSpec& spec);
radix::RadixWorkloadConfig RadixConfigFromSpec(const v1::RadixSpec& spec);
// INVALID_ARGUMENT naming the field as "radix.<field>", its value and the allowed range.
absl::Status ValidateRadixSpec(const v1::RadixSpec& spec);
v1::RadixResult RadixResultFromReport(const radix::RadixWorkloadReport& report);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_RADIX_SPEC_H_
