#include "workloads/custom_kernel/sanitizer_run.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "workloads/child_run.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

constexpr absl::string_view kSanitizerTools[] = {"memcheck", "racecheck", "initcheck", "synccheck"};
// Every line of compute-sanitizer's report starts with this.
constexpr absl::string_view kReportPrefix = "=========";
// The child's own output kept for an error message.
constexpr size_t kChildOutputTailBytes = 4 << 10;

}  // namespace

absl::StatusOr<std::string> SanitizerToolOf(const v1::CustomKernel& kernel) {
  if (kernel.sanitizer_tool().empty()) return std::string("memcheck");
  for (absl::string_view tool : kSanitizerTools) {
    if (kernel.sanitizer_tool() == tool) return std::string(tool);
  }
  return absl::InvalidArgumentError(absl::StrCat("custom_kernel.sanitizer_tool: got '",
                                                 kernel.sanitizer_tool(), "'; must be one of ",
                                                 absl::StrJoin(kSanitizerTools, ", ")));
}

std::vector<std::string> ComputeSanitizerCandidates(const char* cuda_home, const char* path) {
  std::vector<std::string> candidates;
  auto add = [&](const std::string& directory) {
    if (directory.empty()) return;
    std::string file = absl::StrCat(absl::StripSuffix(directory, "/"), "/compute-sanitizer");
    if (std::find(candidates.begin(), candidates.end(), file) == candidates.end()) {
      candidates.push_back(std::move(file));
    }
  };
  if (cuda_home != nullptr && *cuda_home != '\0') {
    const absl::string_view home = absl::StripSuffix(cuda_home, "/");
    add(absl::StrCat(home, "/compute-sanitizer"));
    add(absl::StrCat(home, "/bin"));
  }
  add("/usr/local/cuda/compute-sanitizer");
  add("/usr/local/cuda/bin");
  if (path != nullptr) {
    for (absl::string_view directory : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      add(std::string(directory));
    }
  }
  return candidates;
}

absl::StatusOr<std::string> FindComputeSanitizer(
    const std::vector<std::string>& candidates,
    const std::function<bool(const std::string&)>& is_executable) {
  for (const std::string& candidate : candidates) {
    if (is_executable(candidate)) return candidate;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("compute-sanitizer not found (looked in ", absl::StrJoin(candidates, ", "),
                   "); install NVIDIA's compute-sanitizer (it comes with the CUDA toolkit) or "
                   "set CUDA_HOME for the daemon"));
}

SanitizerSummary SummarizeSanitizerReport(absl::string_view report) {
  SanitizerSummary summary;
  std::string headline;
  std::string where;
  for (absl::string_view line : absl::StrSplit(report, '\n')) {
    if (!absl::ConsumePrefix(&line, kReportPrefix)) continue;
    line = absl::StripTrailingAsciiWhitespace(line);
    // A finding's headline is the one line written right after the prefix and its space;
    // its details ("at ...", "by thread ...") are indented further.
    const bool indented = line.size() > 1 && line[0] == ' ' && line[1] == ' ';
    absl::string_view text = absl::StripLeadingAsciiWhitespace(line);
    if (absl::ConsumePrefix(&text, "ERROR SUMMARY:")) {
      int errors = 0;
      absl::string_view digits = absl::StripLeadingAsciiWhitespace(text);
      size_t length = 0;
      while (length < digits.size() && std::isdigit(static_cast<unsigned char>(digits[length]))) {
        ++length;
      }
      if (length > 0 && absl::SimpleAtoi(digits.substr(0, length), &errors)) {
        summary.errors = errors;
      }
      continue;
    }
    if (text.empty()) continue;
    if (!indented) {
      if (!headline.empty()) continue;
      if (absl::StartsWith(text, "COMPUTE-SANITIZER") || absl::StrContains(text, "SUMMARY:") ||
          absl::StartsWith(text, "Target application returned")) {
        continue;
      }
      headline = std::string(text);
    } else if (!headline.empty() && where.empty() && absl::StartsWith(text, "at ")) {
      where = std::string(text);
    }
  }
  if (!headline.empty()) {
    summary.first_error = where.empty() ? headline : absl::StrCat(headline, "; ", where);
  }
  return summary;
}

std::string CapSanitizerReport(absl::string_view report, size_t max_bytes) {
  if (report.size() <= max_bytes) return std::string(report);
  // The summary is at the end; the findings start at the head.
  const size_t tail = max_bytes / 4;
  const size_t head = max_bytes - tail;
  return absl::StrCat(report.substr(0, head), "\n[... ", report.size() - head - tail,
                      " bytes of the report left out ...]\n", report.substr(report.size() - tail));
}

std::vector<std::string> SanitizerCommand(const std::string& sanitizer, const std::string& tool,
                                          const std::string& kernel_name,
                                          const std::string& log_file,
                                          const std::string& worker_binary,
                                          const std::string& assignment_file) {
  return {sanitizer, "--tool", tool,
          // Only the submitted kernel is instrumented: ours (inputs, reference) run at speed
          // and cannot be blamed for its errors.
          "--kernel-name", absl::StrCat("kne=", kernel_name),
          // A finding ends the kernel, not the context: the child then reports its own
          // failure, and the GPU sees no fault of the program's channel (an Xid, on which the
          // daemon would fail the experiment before the report is read).
          "--destroy-on-device-error", "kernel", "--print-limit", "50", "--log-file", log_file,
          worker_binary, absl::StrCat(kCustomKernelCheckFlag, assignment_file)};
}

absl::StatusOr<v1::ExperimentResult> RunCustomKernelUnderSanitizer(const RunContext& context) {
  const v1::CustomKernel& kernel = context.assignment.request().custom_kernel();
  ASSIGN_OR_RETURN(const std::string tool, SanitizerToolOf(kernel));
  ASSIGN_OR_RETURN(const std::string sanitizer,
                   FindComputeSanitizer(
                       ComputeSanitizerCandidates(std::getenv("CUDA_HOME"), std::getenv("PATH")),
                       [](const std::string& file) { return access(file.c_str(), X_OK) == 0; }));
  std::error_code error;
  const std::filesystem::path worker_binary =
      std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("the worker's own binary (/proc/self/exe): ", error.message()));
  }
  ASSIGN_OR_RETURN(const ScratchDirectory scratch, ScratchDirectory::Create("gpuprof-sanitize"));
  const std::string assignment_file = scratch.File("assignment.pb");
  const std::string log_file = scratch.File("sanitizer.log");
  if (!WriteWholeFile(assignment_file, context.assignment.SerializeAsString())) {
    return absl::InternalError(absl::StrCat("writing ", assignment_file));
  }

  context.progress(v1::PHASE_VERIFICATION, 0, 1,
                   absl::StrCat("checking under compute-sanitizer ", tool, " (", sanitizer,
                                "), in a child process"));
  ASSIGN_OR_RETURN(const pid_t pid,
                   StartChild(SanitizerCommand(sanitizer, tool, kernel.kernel_name(), log_file,
                                               worker_binary.string(), assignment_file),
                              scratch.File("child.out")));
  ASSIGN_OR_RETURN(const int wait_status, WaitForChild(pid));

  const std::string report = ReadWholeFile(log_file).value_or("");
  const SanitizerSummary summary = SummarizeSanitizerReport(report);
  ChildOutcome child = ReadChildOutcome(assignment_file);
  const std::string child_output =
      TailOf(ReadWholeFile(scratch.File("child.out")).value_or(""), kChildOutputTailBytes);
  context.progress(v1::PHASE_VERIFICATION, 1, 1,
                   summary.errors > 0    ? absl::StrCat(summary.errors, " sanitizer error(s)")
                   : summary.errors == 0 ? "no sanitizer errors"
                                         : "the sanitizer did not finish");

  if (summary.errors < 0) {
    // No summary: the sanitizer itself failed (an unsupported device, a crash) or was killed.
    return absl::FailedPreconditionError(absl::StrCat(
        "compute-sanitizer ", tool, " did not finish (it ", DescribeWaitStatus(wait_status),
        "): ", TailOf(report.empty() ? child_output : report, 2048)));
  }
  std::optional<absl::Status> failed = child.error;
  if (!failed.has_value() && !child.result.has_value()) {
    failed = absl::InternalError(absl::StrCat("the checked child ", DescribeWaitStatus(wait_status),
                                              " without a result: ", child_output));
  }
  if (failed.has_value() && summary.errors == 0) {
    // Nothing for the sanitizer to say: the run's own failure (a compile error, say) speaks.
    return *failed;
  }

  v1::ExperimentResult result = std::move(child.result).value_or(v1::ExperimentResult());
  v1::CustomKernelResult& described = *result.mutable_custom_kernel();
  described.set_sanitizer_report(CapSanitizerReport(report, kMaxSanitizerReportBytes));
  described.set_sanitizer_errors(summary.errors);
  (*result.mutable_kernel_config())["sanitizer"] = absl::StrCat("compute-sanitizer --tool ", tool);
  v1::Verification& verification = *result.mutable_verification();
  // The child ran the checks as MODE_TEST; this run is the sanitize mode's.
  const std::string checks =
      absl::StrReplaceAll(verification.message(), {{"(MODE_TEST)", "(MODE_SANITIZE)"}});
  verification.set_checked(true);
  verification.set_method(absl::StrCat(
      "the contract's checks before timing, run once in a child process under compute-sanitizer ",
      tool, " (only the submitted kernel instrumented); nothing timed"));
  if (summary.errors > 0) {
    verification.set_passed(false);
    verification.set_message(absl::StrCat(
        "compute-sanitizer ", tool, " found ", summary.errors,
        summary.errors == 1 ? " error" : " errors", "; the first: ", summary.first_error,
        failed.has_value() ? absl::StrCat("; the checks then failed: ", failed->message())
                           : absl::StrCat("; the checks: ", checks)));
  } else {
    verification.set_message(
        absl::StrCat("compute-sanitizer ", tool, " found no errors; the checks: ", checks));
  }
  return result;
}

int RunCustomKernelCheckChild(const std::string& assignment_path, const FindRunner& find_runner) {
  // Its parent is compute-sanitizer; without it nobody reads what this run finds.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The checks alone (MODE_TEST runs them and times nothing), with line info so that the
  // report names the source lines.
  auto checks_only = [](worker_protocol::ExperimentAssignment& assignment) {
    v1::CustomKernel& kernel = *assignment.mutable_request()->mutable_custom_kernel();
    kernel.set_mode(v1::CustomKernel::MODE_TEST);
    if (std::find(kernel.compile_options().begin(), kernel.compile_options().end(),
                  "-lineinfo") == kernel.compile_options().end()) {
      kernel.add_compile_options("-lineinfo");
    }
  };
  const absl::StatusOr<v1::ExperimentResult> result =
      RunAssignmentInChild(assignment_path, "custom-kernel check", checks_only, find_runner);
  if (!result.ok()) return 2;
  return result->verification().passed() ? 0 : 1;
}

}  // namespace gpuprof::workloads
