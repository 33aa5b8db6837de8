#include "workloads/gpu_driver/jit_kernel.h"

#include "absl/strings/str_cat.h"
#include "common/data_types.h"
#include "common/status_macros.h"

namespace gpuprof::workloads {

namespace v1 = ::gpuprof::v1;

absl::StatusOr<kernels::JitKernel> CompileJitKernel(const kernels::JitRequest& request,
                                                    const gpu::DeviceFacts& device,
                                                    v1::ExperimentResult& result) {
  const kernels::JitCache cache(kernels::DefaultJitCacheDirectory());
  ASSIGN_OR_RETURN(const kernels::JitBinary binary,
                   cache.GetOrCompile(request, {device.compute_major, device.compute_minor}));
  ASSIGN_OR_RETURN(kernels::JitKernel kernel, kernels::JitKernel::Load(binary));
  v1::JitInfo& info = *result.mutable_jit();
  info.set_kernel(absl::StrCat(request.kernel_name, "<", request.template_key, ">"));
  info.set_cache_key(binary.cache_key);
  info.set_cache_hit(binary.cache_hit);
  info.set_compile_ms(binary.compile_ms);
  if (!binary.cache_write_error.empty()) {
    result.add_not_collected(absl::StrCat("JIT cache entry: ", binary.cache_write_error));
  }
  return kernel;
}

void AddKernelConfig(const std::map<std::string, std::string>& described,
                     const kernels::JitKernel& kernel, v1::ExperimentResult& result) {
  auto& kernel_config = *result.mutable_kernel_config();
  for (const auto& [name, value] : described) kernel_config[name] = value;
  const absl::StatusOr<kernels::KernelAttributes> attributes = kernel.Attributes();
  if (!attributes.ok()) {
    result.add_not_collected(absl::StrCat("kernel attributes: ", attributes.status().message()));
    return;
  }
  kernel_config["registers_per_thread"] = absl::StrCat(attributes->registers_per_thread);
  kernel_config["local_bytes_per_thread"] = absl::StrCat(attributes->local_bytes_per_thread);
}

absl::StatusOr<kernels::ElementType> ElementTypeOf(v1::DataType dtype) {
  switch (dtype) {
    case v1::DATA_TYPE_FP32:
      return kernels::ElementType::kFloat32;
    case v1::DATA_TYPE_FP16:
      return kernels::ElementType::kFloat16;
    case v1::DATA_TYPE_BF16:
      return kernels::ElementType::kBFloat16;
    case v1::DATA_TYPE_FP8_E4M3:
      return kernels::ElementType::kFloat8E4M3;
    default:
      return absl::InvalidArgumentError(absl::StrCat("dtype: got ", DataTypeName(dtype),
                                                     "; must be one of fp32, fp16, bf16, fp8-e4m3"));
  }
}

absl::StatusOr<kernels::SlotPattern> SlotPatternOf(v1::SlotPattern pattern) {
  switch (pattern) {
    case v1::SLOT_PATTERN_SEQUENTIAL:
      return kernels::SlotPattern::kSequential;
    case v1::SLOT_PATTERN_RANDOM:
      return kernels::SlotPattern::kRandom;
    case v1::SLOT_PATTERN_SORTED:
      return kernels::SlotPattern::kSorted;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("store.slot_pattern: got ", v1::SlotPattern_Name(pattern),
                       "; must be one of sequential, random, sorted"));
  }
}

}  // namespace gpuprof::workloads
