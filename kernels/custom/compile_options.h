// Which compiler options a submitter may pass with a custom kernel. One rule set for admission
// (the daemon, which links no CUDA library) and for the compile in the worker, so that an
// admitted request never fails on its options after waiting in the queue.
#ifndef GPUPROF_KERNELS_CUSTOM_COMPILE_OPTIONS_H_
#define GPUPROF_KERNELS_CUSTOM_COMPILE_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpuprof::kernels {

// At most this many options from the submitter (the compile adds its own shape macros).
inline constexpr int kMaxUserCompileOptions = 32;
inline constexpr int kMaxUserCompileOptionBytes = 256;
inline constexpr char kAllowedUserCompileOptions[] =
    "allowed: -lineinfo, --use_fast_math, -maxrregcount=N (N from 16 to 255), -DNAME or "
    "-DNAME=VALUE (NAME a C identifier, VALUE of letters, digits and _ . + -)";

// [A-Za-z_][A-Za-z0-9_]*
bool IsCIdentifier(absl::string_view name);

// Whether `option` is one of the allowed forms, at most kMaxUserCompileOptionBytes long.
bool IsAllowedUserCompileOption(absl::string_view option);

// OK, or kInvalidArgument naming the first refused option (or the count) and what is allowed.
absl::Status ValidateUserCompileOptions(const std::vector<std::string>& options);

}  // namespace gpuprof::kernels

#endif  // GPUPROF_KERNELS_CUSTOM_COMPILE_OPTIONS_H_
