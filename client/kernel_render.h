// Text for a custom kernel (docs/custom-kernels.md): the "kernel" block of `gpuprof get` and
// the SASS listing of `gpuprof sass`. Pure functions, unit-tested byte for byte.
#ifndef GPUPROF_CLIENT_KERNEL_RENDER_H_
#define GPUPROF_CLIENT_KERNEL_RENDER_H_

#include <string>

#include "absl/strings/string_view.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::client {

// Whether `text` holds an NVRTC error: "my_gather.cu(12): error: ..." (or "catastrophic
// error"), anywhere (the worker puts the workload's name and the status code before it).
bool HasCompilerError(absl::string_view text);

// "my_gather@3f2a9c0d1e4b (my_gather.cu)" for a custom kernel, "ours" otherwise.
std::string KernelLabel(const v1::Experiment& experiment);

// `get`: name, file and SHA-256 (12 hex), launch shape, registers, spills, shared memory,
// blocks per SM and occupancy with its limiter, each check (passed, or its first mismatch), the
// guard bytes, the sanitizer's summary and the compiler's messages. Empty without a custom
// kernel.
std::string RenderKernelBlock(const v1::Experiment& experiment, absl::string_view indent = "");

// One line for a result (submit --follow, watch): "my_gather@3f2a9c0d1e4b, 40 registers, 0 B
// spills, 6 blocks/SM (75.0%, limited by registers), checks 3/3 passed, guard bytes intact".
std::string KernelSummary(const v1::CustomKernelResult& kernel);

// `sass`: "offset  instruction  [source line]  [samples  top stall]" a line each, the hottest
// lines marked with '>' when samples exist. Empty when the result has no SASS.
std::string RenderSass(const v1::ExperimentResult& result);

// Why an experiment has no SASS to show, for `sass`: not a custom kernel, not run yet, or what
// the result's not_collected says.
std::string NoSassReason(const v1::Experiment& experiment);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_KERNEL_RENDER_H_
