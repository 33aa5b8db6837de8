// The CUDA-free half of a workload, which the daemon links: its place in the request, its
// defaults and its validation. Each workload folder defines one WorkloadSpec and adds one line
// to the table in spec_table.cc; the worker's runners live beside it (runner_table.cc).
#ifndef GPUPROF_WORKLOADS_WORKLOAD_SPEC_H_
#define GPUPROF_WORKLOADS_WORKLOAD_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/gpus.pb.h"
#include "workloads/headline.h"

namespace gpuprof::workloads {

// What validation may assume about the host, from the daemon's GPU inventory.
struct HostLimits {
  // Memory of the smallest GPU: a first, host-wide bound (the worker checks free memory too).
  int64_t smallest_gpu_memory_bytes = 0;
  int gpu_count = 0;
  // The NCCL the workers load, "2.28.3"; empty when unknown.
  std::string nccl_version;
};

HostLimits HostLimitsOf(const gpuprof::v1::ListGpusResponse& inventory);

struct WorkloadSpec {
  // The request's oneof case and the Workload enum value that stand for this workload; its
  // name is the oneof field's name ("index").
  gpuprof::v1::ExperimentRequest::WorkloadCase request_case;
  gpuprof::v1::Workload workload;
  // Runs on leased GPUs (and takes measurement and tracing options) or on the CPU.
  bool uses_gpu = false;
  // Takes tp_degree N > 1: runs as N worker processes, one rank per GPU, joined by NCCL
  // (tp_degree must then equal the GPU count). Workloads without it take tp_degree 1.
  bool supports_tensor_parallelism = false;
  // Fills unset (zero) fields of the workload's spec, and the request fields it decides (a
  // collective's tp_degree). Pure: no validation.
  void (*apply_defaults)(const gpuprof::v1::ListGpusResponse& inventory,
                         gpuprof::v1::ExperimentRequest& request) = nullptr;
  // INVALID_ARGUMENT naming the field as "<workload>.<field>", its value and what is allowed.
  absl::Status (*validate)(const gpuprof::v1::ExperimentRequest& request,
                           const HostLimits& limits) = nullptr;
  // The figure that sums up a finished experiment of this workload (headline.h's builders);
  // nullopt when its result lacks it.
  std::optional<Headline> (*headline)(const gpuprof::v1::Experiment& experiment) = nullptr;
};

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_WORKLOAD_SPEC_H_
