#include "daemon/admission/custom_kernel_validation.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "daemon/admission/request_validation.h"
#include "kernels/custom/compile_options.h"

namespace gpuprof::daemon {
namespace {

constexpr absl::string_view kSanitizerTools[] = {"memcheck", "racecheck", "initcheck",
                                                 "synccheck"};

// Index, store and attention decode have a contract (docs/custom-kernels.md); nothing else.
absl::Status CheckWorkloadTakesCustomKernel(const v1::ExperimentRequest& request) {
  constexpr absl::string_view kWhich =
      "custom kernels run for index, store and attention decode";
  switch (request.workload_case()) {
    case v1::ExperimentRequest::kIndex:
    case v1::ExperimentRequest::kStore:
      return absl::OkStatus();
    case v1::ExperimentRequest::kAttention:
      // Unset is the default, decode.
      if (request.attention().phase() != v1::ATTENTION_PHASE_PREFILL) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat(
          "custom_kernel: attention prefill takes no custom kernel; ", kWhich,
          " (attention.phase ATTENTION_PHASE_DECODE)"));
    case v1::ExperimentRequest::kCollective:
      return absl::InvalidArgumentError(
          absl::StrCat("custom_kernel: the collective workload takes no custom kernel; ", kWhich));
    case v1::ExperimentRequest::kRadix:
      return absl::InvalidArgumentError(
          absl::StrCat("custom_kernel: the radix workload takes no custom kernel; ", kWhich));
    case v1::ExperimentRequest::kCopy:
      return absl::InvalidArgumentError(
          absl::StrCat("custom_kernel: the copy workload takes no custom kernel; ", kWhich));
    case v1::ExperimentRequest::WORKLOAD_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("custom_kernel: no workload is set; ", kWhich));
}

absl::Status CheckSource(const std::string& source, int64_t max_source_bytes) {
  const int64_t size = static_cast<int64_t>(source.size());
  if (size == 0) {
    return absl::InvalidArgumentError(
        "custom_kernel.source: empty; must hold the kernel's CUDA source (one translation "
        "unit)");
  }
  if (size > max_source_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "custom_kernel.source: %d bytes; at most %d allowed (gpuprofd "
        "--custom_kernel_max_source_bytes)",
        size, max_source_bytes));
  }
  // Text that is not UTF-8 never gets here (proto3 strings are checked when the request is
  // parsed); a NUL would end the source early for the compiler, which takes a C string.
  if (const size_t nul = source.find('\0'); nul != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "custom_kernel.source: a NUL byte at byte %d; must be CUDA source text without NUL",
        nul));
  }
  return absl::OkStatus();
}

// A name the compiler's messages show, and a file name in the worker's scratch directory.
absl::Status CheckFileName(const std::string& name) {
  if (name.empty()) return absl::OkStatus();  // "kernel.cu"
  constexpr absl::string_view kAllowed =
      "must be a plain file name of 1-255 printable bytes, without '/', e.g. my_gather.cu";
  if (name.size() > static_cast<size_t>(kMaxCustomNameBytes)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "custom_kernel.file_name: got %s; %s", BoundedExcerpt(name), kAllowed));
  }
  RETURN_IF_ERROR(CheckPrintableText("custom_kernel.file_name", name));
  if (name.find('/') != std::string::npos || name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "custom_kernel.file_name: got %s; %s", BoundedExcerpt(name), kAllowed));
  }
  return absl::OkStatus();
}

absl::Status CheckKernelName(const std::string& name) {
  if (name.empty()) {
    return absl::InvalidArgumentError(
        "custom_kernel.kernel_name: empty; must name the source's extern \"C\" __global__ "
        "function to launch (a C identifier of at most 255 bytes)");
  }
  if (name.size() > static_cast<size_t>(kMaxCustomNameBytes) || !kernels::IsCIdentifier(name)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "custom_kernel.kernel_name: got %s; must be a C identifier ([A-Za-z_][A-Za-z0-9_]*) of "
        "at most %d bytes, the source's extern \"C\" __global__ function",
        BoundedExcerpt(name), kMaxCustomNameBytes));
  }
  return absl::OkStatus();
}

absl::Status CheckLaunchShape(const v1::CustomKernel& kernel) {
  const int threads = kernel.block_threads();
  if (threads != 0 && (threads < 32 || threads > 1024 || threads % 32 != 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "custom_kernel.block_threads: got %d; must be 0 (%d) or a multiple of 32 in [32, 1024] "
        "(whole warps, at most a block's limit)",
        threads, kDefaultCustomBlockThreads));
  }
  const int items = kernel.items_per_block();
  if (items < 0 || items > 65536) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "custom_kernel.items_per_block: got %d; must be 0 (%d) or in [1, 65536]", items,
        kDefaultCustomItemsPerBlock));
  }
  const int shared = kernel.dynamic_shared_bytes();
  if (shared < 0 || shared > kMaxCustomDynamicSharedBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "custom_kernel.dynamic_shared_bytes: got %d; must be in [0, %d] (227 KiB, an H100's "
        "most per block; a GPU with less refuses the launch and the experiment fails saying so)",
        shared, kMaxCustomDynamicSharedBytes));
  }
  return absl::OkStatus();
}

// One option: printable, then the rules the worker's compile applies (kernels/custom).
// `field` is "custom_kernel.compile_options[i]".
absl::Status CheckCompileOption(const std::string& field, const std::string& option) {
  RETURN_IF_ERROR(CheckPrintableText(field, option));
  if (kernels::IsAllowedUserCompileOption(option)) return absl::OkStatus();
  if (option.size() > static_cast<size_t>(kernels::kMaxUserCompileOptionBytes)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: got %s; at most %d bytes; %s", field, BoundedExcerpt(option),
        kernels::kMaxUserCompileOptionBytes, kernels::kAllowedUserCompileOptions));
  }
  return absl::InvalidArgumentError(absl::StrFormat("%s: got %s; %s", field,
                                                    BoundedExcerpt(option),
                                                    kernels::kAllowedUserCompileOptions));
}

absl::Status CheckCompileOptions(const v1::CustomKernel& kernel) {
  if (kernel.compile_options_size() > kernels::kMaxUserCompileOptions) {
    return absl::InvalidArgumentError(
        absl::StrFormat("custom_kernel.compile_options: got %d options; at most %d allowed",
                        kernel.compile_options_size(), kernels::kMaxUserCompileOptions));
  }
  for (int i = 0; i < kernel.compile_options_size(); ++i) {
    RETURN_IF_ERROR(CheckCompileOption(absl::StrFormat("custom_kernel.compile_options[%d]", i),
                                       kernel.compile_options(i)));
  }
  return absl::OkStatus();
}

absl::Status CheckModeAndSanitizer(const v1::CustomKernel& kernel) {
  const std::string& tool = kernel.sanitizer_tool();
  if (tool.empty()) return absl::OkStatus();
  if (kernel.mode() != v1::CustomKernel::MODE_SANITIZE) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "custom_kernel.sanitizer_tool: got %s with mode %s; a sanitizer runs only with "
        "MODE_SANITIZE",
        BoundedExcerpt(tool), v1::CustomKernel::Mode_Name(kernel.mode())));
  }
  if (std::find(std::begin(kSanitizerTools), std::end(kSanitizerTools), tool) ==
      std::end(kSanitizerTools)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "custom_kernel.sanitizer_tool: got %s; must be one of memcheck (the default), "
        "racecheck, initcheck, synccheck",
        BoundedExcerpt(tool)));
  }
  return absl::OkStatus();
}

}  // namespace

void ApplyCustomKernelDefaults(v1::ExperimentRequest& request) {
  if (!request.has_custom_kernel()) return;
  v1::CustomKernel& kernel = *request.mutable_custom_kernel();
  if (kernel.block_threads() == 0) kernel.set_block_threads(kDefaultCustomBlockThreads);
  if (kernel.items_per_block() == 0) kernel.set_items_per_block(kDefaultCustomItemsPerBlock);
  if (kernel.file_name().empty()) kernel.set_file_name(kDefaultCustomFileName);
  if (kernel.mode() == v1::CustomKernel::MODE_UNSPECIFIED) {
    kernel.set_mode(v1::CustomKernel::MODE_BENCHMARK);
  }
  if (kernel.mode() == v1::CustomKernel::MODE_SANITIZE && kernel.sanitizer_tool().empty()) {
    kernel.set_sanitizer_tool(kDefaultSanitizerTool);
  }
  // Profiling is the stall story: PC sampling needs LEVEL_FULL. A level the request chose
  // stays (it may want the metrics without the sampling's cost).
  if (kernel.mode() == v1::CustomKernel::MODE_PROFILE &&
      request.tracing().level() == v1::TracingOptions::LEVEL_UNSPECIFIED) {
    request.mutable_tracing()->set_level(v1::TracingOptions::LEVEL_FULL);
  }
}

absl::Status ValidateCustomKernel(const v1::ExperimentRequest& request, int64_t max_source_bytes) {
  if (!request.has_custom_kernel()) return absl::OkStatus();
  const v1::CustomKernel& kernel = request.custom_kernel();
  RETURN_IF_ERROR(CheckWorkloadTakesCustomKernel(request));
  // A custom kernel runs in one worker on one GPU: the contracts have no ranks.
  if (request.tp_degree() > 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "custom_kernel: got tp_degree %d; a custom kernel runs on one GPU (tp_degree 1)",
        request.tp_degree()));
  }
  RETURN_IF_ERROR(CheckSource(kernel.source(), max_source_bytes));
  RETURN_IF_ERROR(CheckFileName(kernel.file_name()));
  RETURN_IF_ERROR(CheckKernelName(kernel.kernel_name()));
  RETURN_IF_ERROR(CheckLaunchShape(kernel));
  RETURN_IF_ERROR(CheckCompileOptions(kernel));
  return CheckModeAndSanitizer(kernel);
}

}  // namespace gpuprof::daemon
