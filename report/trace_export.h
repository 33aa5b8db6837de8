// An experiment's activity records as a Chrome trace (the JSON "trace event format" that
// Perfetto and chrome://tracing load). CUPTI-free: the client links it.
//
// Layout: a "phases" process with the workload's phases as one track; one process per GPU with
// one thread per CUDA stream holding its kernels, copies and memsets; a "host" process with the
// CPU's waits (synchronisation) and CUPTI's overhead. Events are complete ("ph":"X") with ts and
// dur in microseconds from the first record; args carry launch configuration, bytes and
// hardware metrics. Records the measurement core launched (stream blocker, L2 flush) stay on
// their stream's track, with "scaffolding": true in args and "scaffolding" in their category.
#ifndef GPUPROF_REPORT_TRACE_EXPORT_H_
#define GPUPROF_REPORT_TRACE_EXPORT_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::report {

// The trace as one JSON document. `result` supplies GPU names, the request and what was not
// collected; a default-constructed one is fine (an experiment that produced no result).
std::string ExportChromeTrace(absl::string_view experiment_id,
                              const std::vector<gpuprof::v1::ActivityRecord>& records,
                              const gpuprof::v1::ExperimentResult& result);

// `text` as a JSON string literal, quotes included: escapes '"', '\\' and control characters;
// other bytes (UTF-8) pass through.
std::string JsonString(absl::string_view text);

}  // namespace gpuprof::report

#endif  // GPUPROF_REPORT_TRACE_EXPORT_H_
