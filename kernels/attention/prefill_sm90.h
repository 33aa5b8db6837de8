// The Hopper (sm_90a) prefill kernel's launcher, compiled for sm_90a only; LaunchPrefill
// (prefill.h) calls it for PrefillVariant::kHopperWgmma. Internal to the prefill target.
#ifndef GPUPROF_KERNELS_ATTENTION_PREFILL_SM90_H_
#define GPUPROF_KERNELS_ATTENTION_PREFILL_SM90_H_

#include <cuda_runtime_api.h>

#include "absl/status/statusor.h"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/prefill.h"
#include "kernels/attention/prefill_kernel_params.h"

namespace gpuprof::attention {

// True when the current device runs sm_90a code (compute capability 9.0: H100, H200).
bool CurrentDeviceIsSm90();

// `problem` is already validated; `params` describes it.
absl::StatusOr<PrefillLaunchInfo> LaunchPrefillSm90(const AttentionProblem& problem,
                                                    const PrefillKernelParams& params,
                                                    cudaStream_t stream);

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_PREFILL_SM90_H_
