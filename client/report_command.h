// `gpuprof report ID [-o FILE]`: fetches the Nsight report an experiment submitted with
// `--capture ncu|nsys` left on the daemon (GetCaptureReport, a page at a time), checks its size
// and SHA-256 against what the result recorded, and writes it where asked (docs/nsight.md).
#ifndef GPUPROF_CLIENT_REPORT_COMMAND_H_
#define GPUPROF_CLIENT_REPORT_COMMAND_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "client/command.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::client {

Command ReportCommand();

// "wrote exp-000042.ncu-rep (1.2 MB, ncu report of exp-000042, Version 2025.3.1.0); open it with
// ncu-ui, or `ncu --import exp-000042.ncu-rep --page details`".
std::string DescribeWrittenReport(const v1::CaptureReport& report, absl::string_view experiment_id,
                                  absl::string_view path);

// Where the report may be written: "-" (stdout) always; a file that exists only with `force`
// (FAILED_PRECONDITION naming it and --force otherwise).
absl::Status CheckReportDestination(const std::string& path, bool force);

// A file named as the other tool's report (.ncu-rep for an nsys report, or .nsys-rep for an
// ncu one) would not open: ncu-ui and nsys-ui go by the extension. INVALID_ARGUMENT naming the
// right one; any other name (or "-") is fine.
absl::Status CheckReportExtension(const v1::CaptureReport& report, absl::string_view path);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_REPORT_COMMAND_H_
