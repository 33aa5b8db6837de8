// The radix workload's spec: the bridge between the API's RadixSpec / RadixResult and the
// radix library (radix/), shared by the daemon (defaults, validation) and the worker's runner,
// so both agree on one config. CUDA-free.
#ifndef GPUPROF_WORKLOADS_RADIX_RADIX_SPEC_H_
#define GPUPROF_WORKLOADS_RADIX_RADIX_SPEC_H_

#include "absl/status/status.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/workloads.pb.h"
#include "radix/radix_workload.h"
#include "workloads/workload_spec.h"

namespace gpuprof::workloads {

// Fills unset fields from radix::RadixWorkloadConfig's defaults.
void ApplyRadixDefaults(v1::RadixSpec& spec);
radix::RadixWorkloadConfig RadixConfigFromSpec(const v1::RadixSpec& spec);
// The passes the stream is replayed in, from the request's measurement options:
// warmup_iterations warm-up passes, min_iterations and min_time the floor of timed passes,
// noise_target (0: stop at the floor), max_iterations and time_budget the bounds; unset
// fields take radix::PassConfig's defaults.
radix::PassConfig RadixPassConfigFromOptions(const v1::MeasurementOptions& options);
// INVALID_ARGUMENT for a measurement option that only means something on a GPU.
absl::Status ValidateRadixMeasurement(const v1::MeasurementOptions& options);
// INVALID_ARGUMENT naming the field as "radix.<field>", its value and the allowed range.
absl::Status ValidateRadixSpec(const v1::RadixSpec& spec);
v1::RadixResult RadixResultFromReport(const radix::RadixWorkloadReport& report);

extern const WorkloadSpec kRadixSpec;

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_RADIX_RADIX_SPEC_H_
