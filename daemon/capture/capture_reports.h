// The reports captures leave, kept as files under the state directory (CaptureTools::
// reports_dir) and recorded in the experiment's result (ExperimentResult.capture_report, which
// the store keeps): who may read one and how it is read, a page at a time.
#ifndef GPUPROF_DAEMON_CAPTURE_CAPTURE_REPORTS_H_
#define GPUPROF_DAEMON_CAPTURE_CAPTURE_REPORTS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/profiler.pb.h"

namespace gpuprof::daemon {

// What one GetCaptureReport page carries at most.
inline constexpr int64_t kCaptureReportPageBytes = int64_t{1} << 20;

// Its owner (the user it ran for, or who submitted it) and admins may read an experiment's
// report: it names their kernels and what they did. PERMISSION_DENIED otherwise.
absl::Status CheckMayReadCaptureReport(const v1::Experiment& experiment, const std::string& caller,
                                       bool admin);

// The page of `experiment`'s report at `offset` (at most `page_bytes`), read from the file in
// `reports_dir`. NOT_FOUND when the experiment has no report (with why: it asked for none,
// has not finished, or the capture failed); DATA_LOSS when the file is gone or its size is not
// the one recorded; OUT_OF_RANGE for an offset past its end.
absl::StatusOr<v1::CaptureReportPage> ReadCaptureReportPage(
    const std::string& reports_dir, const v1::Experiment& experiment, int64_t offset,
    int64_t page_bytes = kCaptureReportPageBytes);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_CAPTURE_CAPTURE_REPORTS_H_
