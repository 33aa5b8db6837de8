// The command lines of a capture (worker/nsight_capture.h): the tool's, with its options and
// the worker's child, and the request the child runs. Pure, so that they are tested without a
// GPU or a tool.
#ifndef GPUPROF_WORKER_CAPTURE_COMMAND_H_
#define GPUPROF_WORKER_CAPTURE_COMMAND_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::worker {

// The worker's flag for the child: --capture-child=FILE (a serialized ExperimentAssignment).
inline constexpr absl::string_view kCaptureChildFlag = "--capture-child=";

// ncu's kernel filter when the request sets none: every kernel but the measurement's own
// (the stream blocker) and the input generators of index and store.
inline constexpr absl::string_view kDefaultNcuKernelFilter =
    "regex:^(?!StreamBlockerKernel|CounterFillKernel|ScatteredCacheCheckKernel)";

// The report's temporary name beside its final one: "DIR/exp-42.partial.ncu-rep" for
// "DIR/exp-42.ncu-rep" (the tools keep a name that ends in their extension as given).
std::string PartialReportPath(const std::string& report_path);

// The tool's command line: `tool_path` with its options, writing `output_file`, running
// `worker_binary --capture-child=assignment_file`.
std::vector<std::string> CaptureCommand(const v1::NsightCapture& capture,
                                        const std::string& tool_path,
                                        const std::string& output_file,
                                        const std::string& worker_binary,
                                        const std::string& assignment_file);

// The request as the child runs it: no capture, no tracing, and under ncu a measurement of
// one timed sample after enough warm-up launches to hold the profiled ones.
v1::ExperimentRequest RequestForCaptureChild(const v1::ExperimentRequest& request);

}  // namespace gpuprof::worker

#endif  // GPUPROF_WORKER_CAPTURE_COMMAND_H_
