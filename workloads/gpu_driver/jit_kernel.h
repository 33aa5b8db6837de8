// JIT-compiled kernels as a workload's result reports them: compiled or taken from the disk
// cache, loaded, and described (cache key and hit, compile time, registers, local memory).
#ifndef GPUPROF_WORKLOADS_GPU_DRIVER_JIT_KERNEL_H_
#define GPUPROF_WORKLOADS_GPU_DRIVER_JIT_KERNEL_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "gpu/device_facts.h"
#include "gpuprof/v1/experiment.pb.h"
#include "kernels/copy/copy_reference.h"
#include "kernels/jit/jit_cache.h"
#include "kernels/jit/jit_module.h"

namespace gpuprof::workloads {

// Compiles (or takes from the worker's JIT cache) and loads `request` for the device. Fills
// result.jit, labelled "<kernel_name><<template_key>>", and a not_collected line when the cache
// could not be written.
absl::StatusOr<kernels::JitKernel> CompileJitKernel(const kernels::JitRequest& request,
                                                    const gpu::DeviceFacts& device,
                                                    gpuprof::v1::ExperimentResult& result);

// Adds `described` (the launch configuration) and the compiled kernel's registers and local
// memory to result.kernel_config (a not_collected line when the attributes cannot be read).
void AddKernelConfig(const std::map<std::string, std::string>& described,
                     const kernels::JitKernel& kernel, gpuprof::v1::ExperimentResult& result);

// The kernels' element type for an API data type; INVALID_ARGUMENT for the others.
absl::StatusOr<kernels::ElementType> ElementTypeOf(gpuprof::v1::DataType dtype);

// The store kernels' slot pattern for the API's (defaults applied: unset is refused).
absl::StatusOr<kernels::SlotPattern> SlotPatternOf(gpuprof::v1::SlotPattern pattern);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_GPU_DRIVER_JIT_KERNEL_H_
