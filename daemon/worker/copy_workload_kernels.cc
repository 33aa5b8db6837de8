#include "daemon/worker/copy_workload_kernels.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kernels/copy_kernel_launch.h"
#include "kernels/jit_cache.h"
#include "kernels/jit_module.h"

namespace gpuprof::worker {

absl::StatusOr<CopyWorkloadKernels> CompileCopyWorkloadKernels(
    const kernels::CopyKernelConfig& config, kernels::GpuArchitecture arch,
    const PhaseProgress& progress, gpuprof::v1::ExperimentResult& result) {
  const kernels::JitCache cache(kernels::DefaultJitCacheDirectory());
  ASSIGN_OR_RETURN(const kernels::JitRequest request, kernels::CopyKernelJitRequest(config));
  CopyWorkloadKernels compiled;
  ASSIGN_OR_RETURN(compiled.copy, CompileWorkloadKernel(cache, request, arch,
                                                        absl::StrCat(request.kernel_name, "<",
                                                                     request.template_key, ">")));
  ASSIGN_OR_RETURN(
      compiled.blocker,
      CompileWorkloadKernel(cache, kernels::StreamBlockerJitRequest(), arch, "stream_blocker"));
  const gpuprof::v1::JitInfo& info = compiled.copy.info;
  *result.mutable_jit() = info;
  if (!compiled.copy.cache_write_error.empty()) {
    result.add_not_collected(absl::StrCat("JIT cache entry: ", compiled.copy.cache_write_error));
  }
  progress(gpuprof::v1::PHASE_JIT, 2, 2,
           info.cache_hit() ? absl::StrCat("cache hit: ", info.cache_key())
                            : absl::StrFormat("compiled in %.1f ms", info.compile_ms()));
  return compiled;
}

void AddCopyKernelConfig(const kernels::CopyKernelConfig& config, int64_t num_tokens,
                         const kernels::JitKernel& kernel, gpuprof::v1::ExperimentResult& result) {
  auto& kernel_config = *result.mutable_kernel_config();
  for (const auto& [name, value] : kernels::DescribeCopyKernelConfig(config, num_tokens)) {
    kernel_config[name] = value;
  }
  const absl::StatusOr<kernels::KernelAttributes> attributes = kernel.Attributes();
  if (!attributes.ok()) {
    result.add_not_collected(absl::StrCat("kernel attributes: ", attributes.status().message()));
    return;
  }
  kernel_config["registers_per_thread"] = absl::StrCat(attributes->registers_per_thread);
  kernel_config["local_bytes_per_thread"] = absl::StrCat(attributes->local_bytes_per_thread);
}

}  // namespace gpuprof::worker
