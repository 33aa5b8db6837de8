#include "workloads/custom_kernel/custom_kernel_plan.h"

#include <algorithm>
#include <cctype>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/custom/contract/contract_header.h"
#include "kernels/custom/user_kernel_compile.h"
#include "kernels/jit/jit_cache.h"
#include "workloads/custom_kernel/occupancy.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

constexpr int kDefaultBlockThreads = 256;
// Above this, a launch needs the kernel's opt-in to more dynamic shared memory.
constexpr int64_t kDefaultDynamicSharedLimit = 48 << 10;

// A seed no one chose: each run's checks see inputs the submitter has not seen.
uint64_t FreshSeed() {
  std::random_device device;
  return (uint64_t{device()} << 32) ^ device();
}

bool ChecksOnly(v1::CustomKernel::Mode mode) {
  return mode == v1::CustomKernel::MODE_TEST || mode == v1::CustomKernel::MODE_SANITIZE;
}

}  // namespace

std::string ElementHex(const std::byte* element, int element_bytes) {
  uint64_t value = 0;
  for (int i = std::min(element_bytes, 8) - 1; i >= 0; --i) {
    value = (value << 8) | static_cast<uint64_t>(element[i]);
  }
  return absl::StrFormat("0x%0*x", 2 * element_bytes, value);
}

kernels::UserKernelCompileRequest MakeUserKernelCompileRequest(
    const v1::CustomKernel& kernel, const std::string& contract_name,
    const CustomLaunchShape& shape, const std::vector<std::string>& contract_macros,
    kernels::GpuArchitecture arch) {
  kernels::UserKernelCompileRequest compile{
      .source = kernel.source(),
      .file_name = kernel.file_name().empty() ? "kernel.cu" : kernel.file_name(),
      .kernel_name = kernel.kernel_name(),
      .options = {kernel.compile_options().begin(), kernel.compile_options().end()},
      .headers = {{std::string(kernels::kContractHeaderName),
                   std::string(kernels::ContractHeaderText())}},
      .arch = arch};
  std::string upper_name = contract_name;
  for (char& c : upper_name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const std::string& macro :
       {absl::StrCat("GPUPROF_CONTRACT_", upper_name, "=1"),
        absl::StrCat("GPUPROF_BLOCK_THREADS=", shape.block_threads),
        absl::StrCat("GPUPROF_ITEMS_PER_BLOCK=", shape.items_per_block),
        absl::StrCat("GPUPROF_DYNAMIC_SHARED_BYTES=", shape.dynamic_shared_bytes)}) {
    compile.options.push_back(absl::StrCat("-D", macro));
  }
  for (const std::string& macro : contract_macros) {
    compile.options.push_back(absl::StrCat("-D", macro));
  }
  // Profiling attributes stalls to source lines when the SASS carries them.
  if (kernel.mode() == v1::CustomKernel::MODE_PROFILE &&
      std::find(compile.options.begin(), compile.options.end(), "-lineinfo") ==
          compile.options.end()) {
    compile.options.push_back("-lineinfo");
  }
  return compile;
}

CustomKernelPlan::CustomKernelPlan(const worker_protocol::ExperimentAssignment& assignment,
                                   const cupti::TracingSession* tracing)
    : assignment_(assignment), tracing_(tracing) {}

PlanMessages CustomKernelPlan::messages() const {
  return {.jit = absl::StrCat("compiling the submitted ", contract_name(), " kernel with NVRTC"),
          .allocation = "allocating cleared inputs, and the outputs between guard bytes",
          .verification = "checking against our reference after timing"};
}

absl::Status CustomKernelPlan::Compile(const gpu::DeviceFacts& device,
                                       v1::ExperimentResult& result) {
  device_ = device;
  RETURN_IF_ERROR(ResolveShape());
  const v1::CustomKernel& custom = custom_kernel();
  if (custom.kernel_name().empty()) {
    return absl::InvalidArgumentError("custom_kernel.kernel_name: empty; name the extern \"C\" "
                                      "__global__ function to launch");
  }
  block_threads_ = custom.block_threads() > 0 ? custom.block_threads() : kDefaultBlockThreads;
  if (block_threads_ % 32 != 0 || block_threads_ > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("custom_kernel.block_threads: got ",
                                                   block_threads_,
                                                   "; must be a multiple of 32 from 32 to 1024"));
  }
  items_per_block_ = std::max(1, custom.items_per_block());
  dynamic_shared_bytes_ = std::max(0, custom.dynamic_shared_bytes());
  blocks_ = std::max<int64_t>(1, (items() + items_per_block_ - 1) / items_per_block_);
  file_name_ = custom.file_name().empty() ? "kernel.cu" : custom.file_name();

  const kernels::UserKernelCompileRequest compile = MakeUserKernelCompileRequest(
      custom, contract_name(),
      {.block_threads = block_threads_,
       .items_per_block = items_per_block_,
       .dynamic_shared_bytes = dynamic_shared_bytes_},
      ContractMacros(), {device.compute_major, device.compute_minor});
  kernels::UserKernelCompileLimits limits;
  const worker_protocol::CustomKernelLimits& given = assignment_.custom_kernel_limits();
  if (given.has_compile_timeout() && (given.compile_timeout().seconds() > 0 ||
                                      given.compile_timeout().nanos() > 0)) {
    limits.wall_time = absl::Seconds(given.compile_timeout().seconds()) +
                       absl::Nanoseconds(given.compile_timeout().nanos());
  }
  if (given.compile_memory_bytes() > 0) limits.memory_bytes = given.compile_memory_bytes();

  const kernels::JitCache cache(kernels::DefaultJitCacheDirectory());
  ASSIGN_OR_RETURN(const kernels::UserKernelBinary binary,
                   kernels::CompileUserKernel(compile, limits, cache));
  kernels::JitBinary loadable;
  loadable.cache_key = binary.cache_key;
  loadable.lowered_name = binary.lowered_name;
  loadable.cubin = binary.cubin;
  ASSIGN_OR_RETURN(kernel_, kernels::JitKernel::Load(loadable));
  if (dynamic_shared_bytes_ > kDefaultDynamicSharedLimit) {
    RETURN_IF_ERROR(kernel_.AllowDynamicSharedBytes(dynamic_shared_bytes_));
  }

  v1::JitInfo& jit = *result.mutable_jit();
  jit.set_kernel(absl::StrCat(custom.kernel_name(), " (", file_name_, ", sha256 ",
                              binary.source_sha256.substr(0, 12), ")"));
  jit.set_cache_key(binary.cache_key);
  jit.set_cache_hit(binary.cache_hit);
  jit.set_compile_ms(binary.compile_ms);
  if (!binary.cache_write_error.empty()) {
    result.add_not_collected(absl::StrCat("JIT cache entry: ", binary.cache_write_error));
  }
  v1::CustomKernelResult& described = *result.mutable_custom_kernel();
  described.set_source_sha256(binary.source_sha256);
  described.set_kernel_name(custom.kernel_name());
  described.set_compile_log(binary.compile_log);
  described.set_block_threads(block_threads_);
  described.set_blocks(blocks_);
  DescribeResources(result);

  const absl::StatusOr<std::vector<kernels::SassInstruction>> sass =
      kernels::DisassembleCubin(binary.cubin, binary.lowered_name);
  if (!sass.ok()) {
    result.add_not_collected(absl::StrCat("SASS: ", sass.status().message()));
  } else {
    for (const kernels::SassInstruction& instruction : *sass) {
      v1::SassLine& line = *result.add_sass();
      line.set_pc_offset(instruction.pc_offset);
      line.set_text(instruction.text);
      line.set_source_line(instruction.source_line);
    }
  }
  return absl::OkStatus();
}

void CustomKernelPlan::DescribeResources(v1::ExperimentResult& result) const {
  v1::CustomKernelResult& described = *result.mutable_custom_kernel();
  const absl::StatusOr<kernels::KernelAttributes> attributes = kernel_.Attributes();
  if (!attributes.ok()) {
    result.add_not_collected(absl::StrCat("kernel attributes: ", attributes.status().message()));
    return;
  }
  described.set_registers_per_thread(attributes->registers_per_thread);
  described.set_local_bytes_per_thread(attributes->local_bytes_per_thread);
  described.set_static_shared_bytes(attributes->static_shared_bytes);

  cudaDeviceProp properties = {};
  if (const absl::Status read = CudaStatus(cudaGetDeviceProperties(&properties, 0),
                                           "cudaGetDeviceProperties");
      !read.ok()) {
    result.add_not_collected(absl::StrCat("occupancy: ", read.message()));
    return;
  }
  const SmLimits sm{
      .max_threads_per_sm = properties.maxThreadsPerMultiProcessor,
      .max_blocks_per_sm = properties.maxBlocksPerMultiProcessor,
      .registers_per_sm = properties.regsPerMultiprocessor,
      .shared_bytes_per_sm = static_cast<int64_t>(properties.sharedMemPerMultiprocessor),
      .reserved_shared_bytes_per_block =
          static_cast<int64_t>(properties.reservedSharedMemPerBlock),
      .warp_size = properties.warpSize};
  Occupancy occupancy = ComputeOccupancy({.block_threads = block_threads_,
                                          .registers_per_thread = attributes->registers_per_thread,
                                          .static_shared_bytes = attributes->static_shared_bytes,
                                          .dynamic_shared_bytes = dynamic_shared_bytes_},
                                         sm);
  // The runtime's answer wins where it differs (its allocation rules are the real ones); the
  // limiter is ours.
  const absl::StatusOr<int> runtime_blocks =
      kernel_.MaxActiveBlocksPerMultiprocessor(block_threads_, dynamic_shared_bytes_);
  if (runtime_blocks.ok() && *runtime_blocks != occupancy.blocks_per_sm) {
    const int warps_per_block = (block_threads_ + sm.warp_size - 1) / sm.warp_size;
    occupancy.blocks_per_sm = *runtime_blocks;
    occupancy.theoretical = static_cast<double>(*runtime_blocks * warps_per_block) /
                            (sm.max_threads_per_sm / sm.warp_size);
  }
  described.set_blocks_per_sm(occupancy.blocks_per_sm);
  described.set_theoretical_occupancy(occupancy.theoretical);
  described.set_occupancy_limiter(occupancy.limiter);
}

absl::StatusOr<std::string> CustomKernelPlan::Allocate(cudaStream_t stream) {
  ASSIGN_OR_RETURN(std::string allocated, AllocateBuffers(stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return allocated;
}

absl::Status CustomKernelPlan::Launch(cudaStream_t stream) const {
  return kernel_.Launch(blocks_, block_threads_, params(), /*programmatic_dependent_launch=*/false,
                        stream, dynamic_shared_bytes_);
}

absl::StatusOr<v1::Verification> CustomKernelPlan::RunCheck(uint64_t seed, cudaStream_t stream) {
  if (inputs_seed_ != seed) {
    RETURN_IF_ERROR(FillInputs(seed, stream));
    inputs_seed_ = seed;
  }
  RETURN_IF_ERROR(PoisonOutputs(stream));
  RETURN_IF_ERROR(Launch(stream));
  // A fault of the kernel (illegal address, ...) comes back here as the CUDA error.
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  ASSIGN_OR_RETURN(const OutputComparison compared, CompareWithReference(seed, stream));
  v1::Verification verification;
  verification.set_checked(true);
  verification.set_passed(compared.mismatches == 0 && compared.guard_bytes_overwritten == 0);
  verification.set_method(absl::StrFormat(
      "%s; inputs of seed 0x%016x; outputs poisoned before the launch, between %d guard bytes "
      "on each side",
      reference_method(), seed, kGuardBytes));
  verification.set_mismatches(compared.mismatches);
  verification.set_max_abs_error(compared.max_abs_error);
  std::vector<std::string> message;
  if (!compared.guard_message.empty()) message.push_back(compared.guard_message);
  if (compared.mismatches > 0) {
    message.push_back(absl::StrFormat("%d of %d elements differ; first at %s",
                                      compared.mismatches, compared.elements,
                                      compared.first_mismatch));
  } else {
    message.push_back(
        absl::StrFormat("%d of %d elements match", compared.elements, compared.elements));
  }
  verification.set_message(absl::StrJoin(message, "; "));
  if (compared.guard_bytes_overwritten > 0 && guard_bytes_overwritten_ == 0) {
    guard_bytes_overwritten_ = compared.guard_bytes_overwritten;
  }
  return verification;
}

absl::StatusOr<bool> CustomKernelPlan::CheckBeforeTiming(cudaStream_t stream,
                                                         const measure::PhaseProgress& progress,
                                                         v1::ExperimentResult& result) {
  v1::CustomKernelResult& described = *result.mutable_custom_kernel();
  progress(v1::PHASE_VERIFICATION, 0, kChecksBeforeTiming,
           "checking the submitted kernel on fresh random inputs before timing");
  for (int check = 0; check < kChecksBeforeTiming; ++check) {
    ASSIGN_OR_RETURN(const v1::Verification verification, RunCheck(FreshSeed(), stream));
    *described.add_checks() = verification;
    described.set_guard_bytes_overwritten(guard_bytes_overwritten_);
    progress(v1::PHASE_VERIFICATION, check + 1, kChecksBeforeTiming,
             verification.passed() ? "passed" : "FAILED");
    if (!verification.passed()) {
      // Nothing is timed: a wrong kernel's speed means nothing.
      v1::Verification& failed = *result.mutable_verification();
      failed = verification;
      failed.set_message(absl::StrCat("check ", check + 1, " of ", kChecksBeforeTiming,
                                      " before timing FAILED: ", verification.message()));
      return false;
    }
  }
  if (ChecksOnly(custom_kernel().mode())) {
    v1::Verification& passed = *result.mutable_verification();
    passed = described.checks(kChecksBeforeTiming - 1);
    passed.set_message(absl::StrCat("all ", kChecksBeforeTiming,
                                    " checks on fresh random inputs passed; not timed (",
                                    v1::CustomKernel::Mode_Name(custom_kernel().mode()), ")"));
    return false;
  }
  RETURN_IF_ERROR(FillInputs(timing_seed(), stream));
  inputs_seed_ = timing_seed();
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return true;
}

void CustomKernelPlan::DescribeKernels(v1::ExperimentResult& result) const {
  auto& config = *result.mutable_kernel_config();
  config["kernel"] = absl::StrCat(custom_kernel().kernel_name(), " (", file_name_, ")");
  config["contract"] = contract_name();
  config["block_threads"] = absl::StrCat(block_threads_);
  config["items_per_block"] = absl::StrCat(items_per_block_);
  config["blocks"] = absl::StrCat(blocks_);
  config["dynamic_shared_bytes"] = absl::StrCat(dynamic_shared_bytes_);
  const v1::CustomKernelResult& described = result.custom_kernel();
  config["registers_per_thread"] = absl::StrCat(described.registers_per_thread());
  config["local_bytes_per_thread"] = absl::StrCat(described.local_bytes_per_thread());
}

absl::Status CustomKernelPlan::Verify(cudaStream_t stream, v1::Verification& verification) {
  // The timed inputs are still there: the check also sees what the timed launches did to the
  // guards.
  ASSIGN_OR_RETURN(verification, RunCheck(timing_seed(), stream));
  if (!verification.passed()) {
    verification.set_message(
        absl::StrCat("check after timing FAILED: ", verification.message()));
  }
  after_timing_ = verification;
  return absl::OkStatus();
}

void CustomKernelPlan::FinishResult(v1::ExperimentResult& result) const {
  v1::CustomKernelResult& described = *result.mutable_custom_kernel();
  if (after_timing_.has_value()) *described.add_checks() = *after_timing_;
  described.set_guard_bytes_overwritten(guard_bytes_overwritten_);
  if (custom_kernel().mode() == v1::CustomKernel::MODE_PROFILE) AttributeStallsToSass(result);
}

void CustomKernelPlan::AttributeStallsToSass(v1::ExperimentResult& result) const {
  if (result.sass_size() == 0) return;  // its not_collected line says why
  if (tracing_ == nullptr) {
    // A contract plan made without the run's tracing (CustomKernelPlan's second argument).
    result.add_not_collected(
        "PC-sampling stalls per SASS line: this contract's plan does not read the run's tracing");
    return;
  }
  if (tracing_->level() < v1::TracingOptions::LEVEL_FULL) {
    result.add_not_collected("PC-sampling stalls per SASS line: tracing was not at LEVEL_FULL");
    return;
  }
  // An extern "C" kernel is sampled under its own name.
  const cupti::StallBreakdown* sampled = nullptr;
  for (const cupti::StallBreakdown& breakdown : tracing_->stall_breakdowns()) {
    if (breakdown.function_name == custom_kernel().kernel_name()) sampled = &breakdown;
  }
  if (sampled == nullptr) {
    result.add_not_collected(
        "PC-sampling stalls per SASS line: PC sampling took no sample in the kernel");
    return;
  }
  int64_t placed = 0;
  for (const cupti::StallBreakdown::PcSamples& pc : sampled->by_pc) {
    for (v1::SassLine& line : *result.mutable_sass()) {
      if (static_cast<uint64_t>(line.pc_offset()) != pc.pc_offset) continue;
      line.set_samples(static_cast<int64_t>(pc.samples));
      line.set_top_stall(pc.top_reason);
      placed += static_cast<int64_t>(pc.samples);
      break;
    }
  }
  if (placed < static_cast<int64_t>(sampled->samples)) {
    result.add_not_collected(absl::StrFormat(
        "PC-sampling stalls per SASS line: %d of %d samples fell on offsets the disassembly "
        "does not list",
        static_cast<int64_t>(sampled->samples) - placed, static_cast<int64_t>(sampled->samples)));
  }
}

}  // namespace gpuprof::workloads
