#include "kernels/copy/copy_kernel_launch.h"

#include "common/status_macros.h"
#include "kernels/copy/copy_kernel_sources.h"

namespace gpuprof::kernels {

absl::StatusOr<JitRequest> CopyKernelJitRequest(const CopyKernelConfig& config) {
  ASSIGN_OR_RETURN(std::string name_expression, CopyKernelNameExpression(config));
  return JitRequest{.kernel_name = CopyKernelName(config),
                    .template_key = CopyKernelTemplateKey(config),
                    .source_path = CopyKernelSourcePath(config.kind),
                    .name_expression = std::move(name_expression),
                    .sources = CopyKernelSources()};
}

absl::Status LaunchIndexKernel(const JitKernel& kernel, const CopyKernelConfig& config,
                               const IndexKernelParams& params, cudaStream_t stream) {
  if (config.kind != CopyKernelKind::kIndex) {
    return absl::InvalidArgumentError("LaunchIndexKernel needs an index kernel configuration");
  }
  const LaunchShape shape = CopyKernelLaunchShape(config, params.num_tokens);
  return kernel.Launch(shape.blocks, shape.threads, &params, config.use_pdl, stream);
}

absl::Status LaunchStoreKernel(const JitKernel& kernel, const CopyKernelConfig& config,
                               const StoreKernelParams& params, cudaStream_t stream) {
  if (config.kind != CopyKernelKind::kStore) {
    return absl::InvalidArgumentError("LaunchStoreKernel needs a store kernel configuration");
  }
  const LaunchShape shape = CopyKernelLaunchShape(config, params.num_tokens);
  if (config.fused_kv) {
    return kernel.Launch(shape.blocks, shape.threads, &params, config.use_pdl, stream);
  }
  RETURN_IF_ERROR(kernel.Launch(shape.blocks, shape.threads, &params, config.use_pdl, stream));
  StoreKernelParams values = params;
  values.k = params.v;
  values.k_cache = params.v_cache;
  return kernel.Launch(shape.blocks, shape.threads, &values, config.use_pdl, stream);
}


}  // namespace gpuprof::kernels
