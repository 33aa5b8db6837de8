// Host launchers of the index and store kernels: the JIT request for a configuration, and the
// launches themselves (two for store with separate K and V).
#ifndef GPUPROF_KERNELS_COPY_COPY_KERNEL_LAUNCH_H_
#define GPUPROF_KERNELS_COPY_COPY_KERNEL_LAUNCH_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/copy/copy_kernel_config.h"
#include "kernels/jit/jit_cache.h"
#include "kernels/jit/jit_module.h"
#include "kernels/copy/copy_kernel_params.h"

namespace gpuprof::kernels {

// What the JIT compiles for `config`.
absl::StatusOr<JitRequest> CopyKernelJitRequest(const CopyKernelConfig& config);

// One launch of the gather.
absl::Status LaunchIndexKernel(const JitKernel& kernel, const CopyKernelConfig& config,
                               const IndexKernelParams& params, cudaStream_t stream);

// The scatter: one fused launch, or one launch for K and one for V.
absl::Status LaunchStoreKernel(const JitKernel& kernel, const CopyKernelConfig& config,
                               const StoreKernelParams& params, cudaStream_t stream);

}  // namespace gpuprof::kernels

#endif  // GPUPROF_KERNELS_COPY_COPY_KERNEL_LAUNCH_H_
