#include "daemon/admission/capture_validation.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/admission/request_validation.h"
#include "workloads/spec_table.h"

namespace gpuprof::daemon {
namespace {

bool IsSetName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

}  // namespace

void ApplyCaptureDefaults(v1::ExperimentRequest& request) {
  if (request.capture().tool() != v1::NsightCapture::TOOL_NCU) return;
  v1::NsightCapture& capture = *request.mutable_capture();
  if (capture.ncu_set().empty()) capture.set_ncu_set(kDefaultNcuSet);
  if (capture.launch_count() == 0) capture.set_launch_count(1);
}

absl::Status ValidateCapture(const v1::ExperimentRequest& request, bool uses_gpu,
                             const CaptureTools& tools) {
  if (!request.has_capture()) return absl::OkStatus();
  const v1::NsightCapture& capture = request.capture();
  const bool ncu_options = !capture.ncu_set().empty() || !capture.kernel_filter().empty() ||
                           capture.launch_skip() != 0 || capture.launch_count() != 0;
  if (capture.tool() == v1::NsightCapture::TOOL_UNSPECIFIED) {
    if (!ncu_options) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "capture.tool: not set, but the capture's ncu options are; must be ncu or nsys");
  }
  const std::string tool = NsightToolName(capture.tool());
  if (capture.tool() == v1::NsightCapture::TOOL_NSYS && ncu_options) {
    return absl::InvalidArgumentError(
        "capture: ncu_set, kernel_filter, launch_skip and launch_count are ncu's options; "
        "nsys takes none of them");
  }
  if (capture.tool() == v1::NsightCapture::TOOL_NCU && !uses_gpu) {
    return absl::InvalidArgumentError(absl::StrCat(
        "capture.tool: ncu profiles GPU kernels and ", workloads::WorkloadName(request),
        " runs on the CPU; nsys records a CPU workload's timeline"));
  }
  if (request.tp_degree() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "capture: runs the experiment in one worker process under ", tool, "; tp_degree is ",
        request.tp_degree(), ", one process per rank (capture with --tp 1)"));
  }
  if (request.has_custom_kernel() &&
      request.custom_kernel().mode() == v1::CustomKernel::MODE_SANITIZE) {
    return absl::InvalidArgumentError(absl::StrCat(
        "capture: not with custom_kernel.mode MODE_SANITIZE (compute-sanitizer and ", tool,
        " each need the process to themselves)"));
  }
  if (capture.tool() == v1::NsightCapture::TOOL_NCU) {
    if (!IsSetName(capture.ncu_set())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "capture.ncu_set: got ", BoundedExcerpt(capture.ncu_set()),
          "; must be one of ncu's section sets (`ncu --list-sets`: basic, detailed, full, "
          "roofline, ...): letters, digits, '_' and '-'"));
    }
    RETURN_IF_ERROR(CheckNcuSet(tools.ncu, capture.ncu_set()));
    if (capture.kernel_filter().size() > kMaxCaptureTextBytes) {
      return absl::InvalidArgumentError(absl::StrCat("capture.kernel_filter: ",
                                                     capture.kernel_filter().size(),
                                                     " bytes; at most ", kMaxCaptureTextBytes));
    }
    RETURN_IF_ERROR(CheckPrintableText("capture.kernel_filter", capture.kernel_filter()));
    if (capture.launch_count() < 0 || capture.launch_count() > kMaxCaptureLaunchCount) {
      return absl::InvalidArgumentError(absl::StrCat(
          "capture.launch_count: got ", capture.launch_count(), "; must be in [0, ",
          kMaxCaptureLaunchCount,
          "] (0: 1; every profiled launch is replayed once per counter pass)"));
    }
    if (capture.launch_skip() < 0 || capture.launch_skip() > kMaxCaptureLaunchSkip) {
      return absl::InvalidArgumentError(absl::StrCat("capture.launch_skip: got ",
                                                     capture.launch_skip(), "; must be in [0, ",
                                                     kMaxCaptureLaunchSkip, "]"));
    }
  }
  return CheckCaptureToolAvailable(tools, capture.tool());
}

}  // namespace gpuprof::daemon
