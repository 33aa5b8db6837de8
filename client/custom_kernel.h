// The user's side of custom kernels (docs/custom-kernels.md): --kernel-file read into the
// request (refused here, before any RPC, when it cannot be sent), the kernel to launch found in
// the source, the kernel flags refused for workloads that take no kernel, a sweep axis over
// kernel files, and a kernel that did not compile told from other failures (exit code 2).
#ifndef GPUPROF_CLIENT_CUSTOM_KERNEL_H_
#define GPUPROF_CLIENT_CUSTOM_KERNEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/command_line.h"
#include "client/request_builder.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/sweep.pb.h"
#include "sweep/sweep_expansion.h"

namespace gpuprof::client {

// The daemon's default source limit: a larger file is refused before it is sent.
inline constexpr int64_t kMaxKernelFileBytes = 256 * 1024;

// The sweep axis over kernels: its point parameter reads "kernel=my_gather.cu" (or "ours").
inline constexpr absl::string_view kKernelAxisName = sweep::kKernelAxis;
// In a --kernel-file list of a sweep: our own kernel as one of the points.
inline constexpr absl::string_view kOurKernelWord = sweep::kOurKernel;

// The file's bytes. InvalidArgument naming the path when it is missing, unreadable, not a
// regular file, empty or over kMaxKernelFileBytes.
absl::StatusOr<std::string> ReadKernelFile(const std::string& path);

// The names of the source's `extern "C" __global__` functions, in order; comments and string
// literals are skipped, __launch_bounds__(...) and return types are not taken for the name.
std::vector<std::string> ExternCGlobalFunctions(absl::string_view source);

// The kernel to launch: `given` when set (InvalidArgument when the source declares extern "C"
// __global__ functions and it is none of them), else the source's only such function;
// InvalidArgument listing the candidates (or saying there are none) otherwise.
absl::StatusOr<std::string> ChooseKernelName(absl::string_view source,
                                             absl::string_view file_name,
                                             const std::optional<std::string>& given);

// source, file_name (the path's base name) and kernel_name for the file at `path`.
absl::StatusOr<v1::CustomKernel> KernelFromFile(const std::string& path,
                                                const std::optional<std::string>& kernel_name);

// InvalidArgument naming the first custom kernel flag among `words` (the words after the
// workload) when the builder's workload takes no custom kernel; OK otherwise.
absl::Status RefuseCustomKernelFlags(const ExperimentRequestBuilder& builder,
                                     const std::vector<std::string>& words);

// Checks the custom kernel flags go together: the others need --kernel-file, each
// --kernel-option is one the compile allows (kernels/custom/compile_options), --sanitizer
// needs --mode sanitize, attention only in its decode phase. `kernel_files` are --kernel-file's
// paths (a sweep may give several; submit exactly one).
absl::Status CheckCustomKernelFlags(const ExperimentRequestBuilder& builder,
                                    const ParsedArgs& args, const v1::ExperimentRequest& request,
                                    const std::vector<std::string>& kernel_files);

// Submit: reads --kernel-file into request.custom_kernel (source, file_name, kernel_name) after
// CheckCustomKernelFlags. Nothing to do without custom kernel flags.
absl::Status ApplyKernelFile(const ExperimentRequestBuilder& builder, const ParsedArgs& args,
                             v1::ExperimentRequest& request);

// Sweep: --kernel-file a.cu,b.cu[,ours] as an axis, each point one source (ours: none). Its
// field is kKernelAxisName, its values the labels (file base names, "ours"), its kernels the
// CustomKernel of each (empty for ours). InvalidArgument for a file that cannot be read, two
// files of the same base name, or a list of fewer than two.
absl::StatusOr<v1::SweepAxis> KernelSweepAxis(const std::vector<std::string>& entries,
                                              const std::optional<std::string>& kernel_name);

// Whether an experiment ended because the custom kernel did not compile: FAILED, and the
// reason begins with "compile" or holds an NVRTC error ("g.cu(12): error: ...", as the worker
// passes CompileUserKernel's message on: "index: INVALID_ARGUMENT: g.cu(12): error: ..."), or
// the result carries the compiler's log and no compiled kernel (no registers).
bool KernelDidNotCompile(v1::ExperimentState state, absl::string_view reason,
                         const v1::ExperimentResult& result);
// The compiler's messages as it wrote them (file:line), each line made safe for a terminal:
// the result's compile log, else the reason.
std::string CompilerMessages(absl::string_view reason, const v1::ExperimentResult& result);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_CUSTOM_KERNEL_H_
