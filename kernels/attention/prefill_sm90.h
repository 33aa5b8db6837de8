// The Hopper (sm_90a) prefill kernels' launchers, compiled for sm_90a only; LaunchPrefill
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
                                                    const PrefillWorkspace& workspace,
                                                    cudaStream_t stream);

// What the fp8 (e4m3) Hopper kernel takes beyond ValidateAttentionProblem: head_dim 128 or 256,
// pages of a multiple of 16 rows. The message names the field.
absl::Status CheckFp8PrefillShape(const AttentionShape& shape);

// The fp8 kernel (prefill_sm90_fp8.cu): Q, K, V e4m3, O bf16. `params.scale_log2` already
// includes the Q and K scales and `params.v_scale` is V's.
absl::StatusOr<PrefillLaunchInfo> LaunchPrefillSm90Fp8(const AttentionProblem& problem,
                                                       const PrefillKernelParams& params,
                                                       cudaStream_t stream);

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_PREFILL_SM90_H_
