// CustomKernel.MODE_SANITIZE: a submitted kernel's checks run under NVIDIA's compute-sanitizer
// (memcheck, racecheck, initcheck or synccheck). The sanitizer must start the process it
// watches, so the worker re-executes its own binary in a child process,
//
//   compute-sanitizer --tool memcheck --log-file DIR/sanitizer.log ...
//       /path/to/gpuprof_worker --custom-kernel-check=DIR/assignment.pb
//
// which compiles the kernel and runs the contract's checks before timing (nothing is timed),
// writes its result beside the assignment and exits. The parent returns that result with the
// sanitizer's report (capped) and the errors it counted; the worker fails the experiment when
// there were any (worker/experiment_dispatch.cc), with the count and the first in the reason.
#ifndef GPUPROF_WORKLOADS_CUSTOM_KERNEL_SANITIZER_RUN_H_
#define GPUPROF_WORKLOADS_CUSTOM_KERNEL_SANITIZER_RUN_H_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpuprof/v1/experiment.pb.h"
#include "workloads/run_context.h"

namespace gpuprof::workloads {

// The worker's flag for the child: --custom-kernel-check=FILE (a serialized
// ExperimentAssignment).
inline constexpr absl::string_view kCustomKernelCheckFlag = "--custom-kernel-check=";

// Kept of the sanitizer's report in the result: its head and its end (the summary).
inline constexpr size_t kMaxSanitizerReportBytes = 64 << 10;

// The tool MODE_SANITIZE runs: sanitizer_tool, or memcheck when empty. kInvalidArgument
// naming the field and the tools for anything else.
absl::StatusOr<std::string> SanitizerToolOf(const gpuprof::v1::CustomKernel& kernel);

// Where compute-sanitizer is looked for, in order: $CUDA_HOME/compute-sanitizer/,
// $CUDA_HOME/bin/, /usr/local/cuda/compute-sanitizer/, /usr/local/cuda/bin/, then each
// directory of $PATH. `cuda_home` and `path` may be null.
std::vector<std::string> ComputeSanitizerCandidates(const char* cuda_home, const char* path);

// The first candidate that is an executable file; kFailedPrecondition "compute-sanitizer not
// found (looked in ...)" when none is. `is_executable` is access(X_OK) outside tests.
absl::StatusOr<std::string> FindComputeSanitizer(
    const std::vector<std::string>& candidates,
    const std::function<bool(const std::string&)>& is_executable);

struct SanitizerSummary {
  // From "ERROR SUMMARY: N errors"; -1 when the report has no summary (the sanitizer did not
  // finish).
  int errors = -1;
  // The first finding: its headline and where ("Invalid __global__ write of size 2 bytes; at
  // decode_paged.cu:97:decode_paged+0x1a40"); empty when there is none.
  std::string first_error;
};
SanitizerSummary SummarizeSanitizerReport(absl::string_view report);

// `report` unchanged when it fits in `max_bytes`; else its head and its tail with a line
// saying how much was left out between them.
std::string CapSanitizerReport(absl::string_view report, size_t max_bytes);

// compute-sanitizer's command line for the child.
std::vector<std::string> SanitizerCommand(const std::string& sanitizer, const std::string& tool,
                                          const std::string& kernel_name,
                                          const std::string& log_file,
                                          const std::string& worker_binary,
                                          const std::string& assignment_file);

// The parent's side: runs the child under the sanitizer, waits for it and assembles the
// result (the child's checks, resources and SASS; the report and its error count; the
// verification says what the sanitizer found). A compile error comes back as the child's
// status (kInvalidArgument with the compiler's messages); a missing sanitizer as
// kFailedPrecondition.
absl::StatusOr<gpuprof::v1::ExperimentResult> RunCustomKernelUnderSanitizer(
    const RunContext& context);

// The child's side, from the worker's main: reads the assignment at `assignment_path`, runs
// it with `run` (the workload's runner) in checks-only mode, writes the result to
// `assignment_path` + ".result" (or the failure to + ".error") and returns the exit status:
// 0 when every check passed, 1 when one failed, 2 when the run failed.
using FindRunner = std::function<RunWorkloadFunction(const gpuprof::v1::ExperimentRequest&)>;
int RunCustomKernelCheckChild(const std::string& assignment_path, const FindRunner& find_runner);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_CUSTOM_KERNEL_SANITIZER_RUN_H_
