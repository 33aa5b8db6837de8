#include "daemon/capture/capture_reports.h"

#include <algorithm>
#include <fstream>
#include <system_error>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/experiment_states.h"
#include "daemon/capture/nsight_tools.h"

namespace gpuprof::daemon {

absl::Status CheckMayReadCaptureReport(const v1::Experiment& experiment, const std::string& caller,
                                       bool admin) {
  if (admin || caller == experiment.user() ||
      (!experiment.submitted_by().empty() && caller == experiment.submitted_by())) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      experiment.id(), "'s capture report is for its owner (", experiment.user(),
      ") and admins; you are ", caller));
}

absl::StatusOr<v1::CaptureReportPage> ReadCaptureReportPage(const std::string& reports_dir,
                                                            const v1::Experiment& experiment,
                                                            int64_t offset, int64_t page_bytes) {
  const v1::NsightCapture::Tool tool = experiment.request().capture().tool();
  if (tool == v1::NsightCapture::TOOL_UNSPECIFIED) {
    return absl::NotFoundError(absl::StrCat(experiment.id(),
                                            " was not submitted with a capture (gpuprof submit "
                                            "... --capture ncu|nsys)"));
  }
  if (!experiment.result().has_capture_report()) {
    if (!IsTerminalState(experiment.state())) {
      return absl::NotFoundError(absl::StrCat(experiment.id(), " is ",
                                              v1::ExperimentState_Name(experiment.state()),
                                              "; its report comes once it has finished"));
    }
    return absl::NotFoundError(absl::StrCat(
        experiment.id(), " left no ", NsightToolName(tool), " report (it ended ",
        v1::ExperimentState_Name(experiment.state()),
        experiment.reason().empty() ? "" : absl::StrCat(": ", experiment.reason()), ")"));
  }
  const v1::CaptureReport& report = experiment.result().capture_report();
  const std::string path = CaptureReportPath(reports_dir, experiment.id(), tool);
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (error) {
    return absl::DataLossError(absl::StrCat(experiment.id(), "'s report ", path,
                                            " is gone from the daemon's state directory (",
                                            error.message(), ")"));
  }
  if (static_cast<int64_t>(size) != report.size_bytes()) {
    return absl::DataLossError(absl::StrCat(experiment.id(), "'s report ", path, " is ", size,
                                            " bytes; its result recorded ", report.size_bytes()));
  }
  if (offset < 0 || offset > report.size_bytes()) {
    return absl::OutOfRangeError(absl::StrCat("offset: got ", offset, "; the report is ",
                                              report.size_bytes(), " bytes"));
  }
  std::ifstream file(path, std::ios::binary);
  if (!file.good()) {
    return absl::DataLossError(absl::StrCat("cannot open ", experiment.id(), "'s report ", path));
  }
  const int64_t length = std::min(page_bytes, report.size_bytes() - offset);
  v1::CaptureReportPage page;
  *page.mutable_report() = report;
  std::string& data = *page.mutable_data();
  data.resize(static_cast<size_t>(length));
  file.seekg(offset);
  file.read(data.data(), length);
  if (file.gcount() != length) {
    return absl::DataLossError(absl::StrCat(experiment.id(), "'s report ", path,
                                            " ended early (read ", file.gcount(), " of ", length,
                                            " bytes at ", offset, ")"));
  }
  page.set_eof(offset + length == report.size_bytes());
  return page;
}

}  // namespace gpuprof::daemon
