// ExperimentRequest.capture: after the measured run, the worker runs the request once more in
// a child process under the Nsight tool the daemon found (ncu or nsys), which writes its report
// where the daemon keeps it (CaptureSetup.report_path, <state_dir>/reports/<id>.ncu-rep):
//
//   ncu --set basic --kernel-name regex:... --launch-count 1 --export DIR/exp-42.partial.ncu-rep
//       /path/to/gpuprof_worker --capture-child=SCRATCH/assignment.pb
//
// The child (this binary again) runs the workload without CUPTI (the tool is the process's
// profiler) and, under ncu, with a short measurement: the profiled launches are warm-up
// launches, every one replayed per counter pass, and the stream blocker is never profiled (a
// serialised blocker would wait for its release until its timeout). The measured run's figures
// stay the experiment's result; the capture adds the report's name, size, SHA-256 and the
// tool's version (ExperimentResult.capture_report). The child stays in the worker's process
// group, which the daemon kills at the experiment's timeout.
#ifndef GPUPROF_WORKER_NSIGHT_CAPTURE_H_
#define GPUPROF_WORKER_NSIGHT_CAPTURE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/worker_protocol/worker_protocol.pb.h"
#include "worker/capture_command.h"
#include "workloads/run_context.h"

namespace gpuprof::worker {

// The parent's side: runs the child under the tool (telling `progress` 0 of 1 as it starts, 1
// of 1 once the report is kept), waits for it, moves the report to
// setup.report_path and describes it. A child that failed, a tool that wrote no report, or a
// report over setup.max_report_bytes (deleted) is an error naming what went wrong, with the
// tool's output's tail.
absl::StatusOr<v1::CaptureReport> RunCapture(
    const worker_protocol::ExperimentAssignment& assignment,
    const std::function<void(int64_t done, const std::string& message)>& progress);

// The child's side, from the worker's main: runs the assignment at `assignment_path` with the
// runner `find_runner` gives, writes "<path>.result" (or the failure to "<path>.error") and
// returns the exit status (0 when it ran, 2 when it failed).
using FindRunnerForCapture =
    std::function<workloads::RunWorkloadFunction(const v1::ExperimentRequest&)>;
int RunCaptureChild(const std::string& assignment_path, const FindRunnerForCapture& find_runner);

}  // namespace gpuprof::worker

#endif  // GPUPROF_WORKER_NSIGHT_CAPTURE_H_
