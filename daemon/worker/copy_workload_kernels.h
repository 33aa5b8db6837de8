// The JIT phase the index and store runners share: their copy kernel and the stream blocker,
// compiled or taken from the disk cache, and the outcome recorded in the result.
#ifndef GPUPROF_DAEMON_WORKER_COPY_WORKLOAD_KERNELS_H_
#define GPUPROF_DAEMON_WORKER_COPY_WORKLOAD_KERNELS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "daemon/worker/gpu_measurement.h"
#include "gpuprof/v1/experiment.pb.h"
#include "kernels/copy_kernel_config.h"

namespace gpuprof::worker {

struct CopyWorkloadKernels {
  WorkloadKernel copy;     // the gather or scatter chosen by the config
  WorkloadKernel blocker;  // holds the stream so launch latency is not timed
};

// Fills result.jit (and a not_collected line when the cache could not be written) and
// reports the end of PHASE_JIT through `progress`.
absl::StatusOr<CopyWorkloadKernels> CompileCopyWorkloadKernels(
    const kernels::CopyKernelConfig& config, kernels::GpuArchitecture arch,
    const PhaseProgress& progress, gpuprof::v1::ExperimentResult& result);

// Adds the launch configuration and the compiled kernel's registers and local memory to
// result.kernel_config (a not_collected line when the attributes cannot be read).
void AddCopyKernelConfig(const kernels::CopyKernelConfig& config, int64_t num_tokens,
                         const kernels::JitKernel& kernel, gpuprof::v1::ExperimentResult& result);

}  // namespace gpuprof::worker

#endif  // GPUPROF_DAEMON_WORKER_COPY_WORKLOAD_KERNELS_H_
