#include "worker/nsight_capture.h"

#include <openssl/evp.h>
#include <sys/types.h>

#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "workloads/child_run.h"

namespace gpuprof::worker {
namespace {

// The tool's output kept for an error message.
constexpr size_t kOutputTailBytes = 4 << 10;

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) absl::StrAppendFormat(&hex, "%02x", digest[i]);
  return hex;
}

std::string ToolName(v1::NsightCapture::Tool tool) {
  return tool == v1::NsightCapture::TOOL_NSYS ? "nsys" : "ncu";
}

}  // namespace

absl::StatusOr<v1::CaptureReport> RunCapture(
    const worker_protocol::ExperimentAssignment& assignment,
    const std::function<void(int64_t done, const std::string& message)>& progress) {
  const worker_protocol::CaptureSetup& setup = assignment.capture();
  const v1::NsightCapture& capture = assignment.request().capture();
  const std::string tool = ToolName(capture.tool());
  if (setup.tool_path().empty() || setup.report_path().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the daemon sent no ", tool, " or no report path for the capture"));
  }
  std::error_code error;
  const std::filesystem::path worker_binary =
      std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("the worker's own binary (/proc/self/exe): ", error.message()));
  }
  ASSIGN_OR_RETURN(const workloads::ScratchDirectory scratch,
                   workloads::ScratchDirectory::Create("gpuprof-capture"));
  const std::string assignment_file = scratch.File("assignment.pb");
  worker_protocol::ExperimentAssignment child = assignment;
  *child.mutable_request() = RequestForCaptureChild(assignment.request());
  child.clear_capture();
  if (!workloads::WriteWholeFile(assignment_file, child.SerializeAsString())) {
    return absl::InternalError(absl::StrCat("writing ", assignment_file));
  }
  const std::string partial = PartialReportPath(setup.report_path());
  std::filesystem::remove(partial, error);
  const std::vector<std::string> command =
      CaptureCommand(capture, setup.tool_path(), partial, worker_binary.string(), assignment_file);
  progress(0, absl::StrCat("running the experiment again under ", tool, " (",
                           setup.tool_version().empty() ? setup.tool_path() : setup.tool_version(),
                           ")"));
  ASSIGN_OR_RETURN(const pid_t pid, workloads::StartChild(command, scratch.File("tool.out")));
  ASSIGN_OR_RETURN(const int wait_status, workloads::WaitForChild(pid));
  const std::string output = workloads::TailOf(
      workloads::ReadWholeFile(scratch.File("tool.out")).value_or(""), kOutputTailBytes);
  const workloads::ChildOutcome child_outcome = workloads::ReadChildOutcome(assignment_file);
  auto fail = [&](absl::Status status) {
    std::filesystem::remove(partial, error);
    return status;
  };
  if (child_outcome.error.has_value()) {
    const absl::Status& failed = *child_outcome.error;
    return fail(absl::Status(failed.code(), absl::StrCat("the run under ", tool, " failed: ",
                                                         failed.message())));
  }
  if (!child_outcome.result.has_value()) {
    return fail(absl::InternalError(absl::StrCat(tool, " (or the run under it) ",
                                                 workloads::DescribeWaitStatus(wait_status),
                                                 " before the run ended: ", output)));
  }
  const std::optional<std::string> report = workloads::ReadWholeFile(partial);
  if (!report.has_value() || report->empty()) {
    return fail(absl::FailedPreconditionError(absl::StrCat(
        tool, " wrote no report (it ", workloads::DescribeWaitStatus(wait_status), "): ", output)));
  }
  if (setup.max_report_bytes() > 0 &&
      static_cast<int64_t>(report->size()) > setup.max_report_bytes()) {
    return fail(absl::ResourceExhaustedError(absl::StrCat(
        tool, "'s report was ", report->size(), " bytes, over the daemon's limit of ",
        setup.max_report_bytes(),
        " (gpuprofd --max_capture_report_bytes); deleted. Profile fewer launches or a "
        "smaller set")));
  }
  std::filesystem::rename(partial, setup.report_path(), error);
  if (error) {
    return fail(absl::InternalError(absl::StrCat("moving ", partial, " to ", setup.report_path(),
                                                 ": ", error.message())));
  }
  v1::CaptureReport described;
  described.set_tool(capture.tool());
  described.set_file_name(std::filesystem::path(setup.report_path()).filename().string());
  described.set_size_bytes(static_cast<int64_t>(report->size()));
  described.set_sha256(Sha256Hex(*report));
  described.set_tool_version(setup.tool_version());
  described.set_command(absl::StrJoin(command, " "));
  progress(1, absl::StrCat(tool, " report kept: ", described.file_name(), ", ",
                           described.size_bytes(), " bytes"));
  return described;
}

int RunCaptureChild(const std::string& assignment_path, const FindRunnerForCapture& find_runner) {
  return workloads::RunAssignmentInChild(assignment_path, "capture", nullptr, find_runner).ok()
             ? 0
             : 2;
}

}  // namespace gpuprof::worker
