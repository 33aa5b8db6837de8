// Admission's checks of ExperimentRequest.custom_kernel (a submitter's own CUDA kernel run in
// place of ours), before anything is stored or any GPU is leased: which workloads take one, the
// source's size, the names, the launch shape, the compiler options and the mode. Pure functions
// of the request and the daemon's limits, as the rest of request validation. Errors name the
// field, what was wrong and what is allowed:
// "custom_kernel.block_threads: got 100; must be 0 (256) or a multiple of 32 in [32, 1024]".
#ifndef GPUPROF_DAEMON_ADMISSION_CUSTOM_KERNEL_VALIDATION_H_
#define GPUPROF_DAEMON_ADMISSION_CUSTOM_KERNEL_VALIDATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::daemon {

// The defaults of an unset field, as proto/gpuprof/v1/experiment.proto documents them.
inline constexpr int kDefaultCustomBlockThreads = 256;
inline constexpr int kDefaultCustomItemsPerBlock = 1;
inline constexpr char kDefaultCustomFileName[] = "kernel.cu";
inline constexpr char kDefaultSanitizerTool[] = "memcheck";
// gpuprofd --custom_kernel_max_source_bytes's default (256 KiB).
inline constexpr int64_t kDefaultCustomKernelMaxSourceBytes = int64_t{256} << 10;

// The largest dynamic shared memory a block may ask for: an H100's opt-in maximum per block
// (227 KiB). A GPU with less refuses the launch, and the experiment fails saying so.
inline constexpr int kMaxCustomDynamicSharedBytes = 232448;
// Names a compiler and a file system both take.
inline constexpr int kMaxCustomNameBytes = 255;

// Fills the custom kernel's unset fields (block_threads 256, items_per_block 1, file_name
// "kernel.cu", mode MODE_BENCHMARK, MODE_SANITIZE's tool memcheck) and, for MODE_PROFILE,
// tracing at LEVEL_FULL unless the request set a level. Nothing without a custom kernel. Pure,
// and idempotent: must run before the request's own tracing default.
void ApplyCustomKernelDefaults(v1::ExperimentRequest& request);

// OK when the request carries no custom kernel. Called after CheckWellFormed (the mode is a
// value the enum names) and with the workload set. `max_source_bytes`: the daemon's limit.
absl::Status ValidateCustomKernel(const v1::ExperimentRequest& request, int64_t max_source_bytes);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_ADMISSION_CUSTOM_KERNEL_VALIDATION_H_
