// An experiment's activity records as a Chrome trace (the JSON "trace event format" that
// Perfetto and chrome://tracing load). CUPTI-free: the client links it.
//
// Layout: a "phases" process with the workload's phases as one track; one process per GPU with
// one thread per CUDA stream holding its kernels, copies and memsets; a "host" process with the
// CPU's waits (synchronisation), CUPTI's overhead and one thread per launching host thread with
// its launch calls (cudaLaunchKernel, cudaGraphLaunch, ...). Events are complete ("ph":"X") with
// ts and dur in microseconds from the first record; a flow (an arrow: "s" on the launch, "f"
// with "bp":"e" on the GPU record, one id each, cat and name "launch") joins each launch to the
// GPU work of its correlation id. Slice names are short (a phase's short name, a kernel without
// namespaces and parameters, at most 40 bytes); args keep the full name ("full_name", or
// "description" for a phase), launch configuration, bytes and hardware metrics. Records
// without timestamps (kernels replayed by the profiler) are left off the timeline: otherData
// counts them (untimed_records_left_out) and lists the first 64 with their args. Records the
// measurement core launched (stream blocker, L2 flush) stay on their stream's track, with
// "scaffolding": true in args and "scaffolding" in their category.
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
