// Admission's checks of ExperimentRequest.capture (the experiment run once more under ncu or
// nsys on the daemon's side), before anything is stored: the tool is installed on this node,
// the workload runs in one process (ncu: on a GPU), and the ncu options are in range. Pure
// functions of the request and the tools the daemon found. Errors name the field, the value
// and what is allowed: "capture.launch_count: got 500; must be in [0, 50] (0: 1)".
#ifndef GPUPROF_DAEMON_ADMISSION_CAPTURE_VALIDATION_H_
#define GPUPROF_DAEMON_ADMISSION_CAPTURE_VALIDATION_H_

#include "absl/status/status.h"
#include "daemon/capture/nsight_tools.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::daemon {

inline constexpr int kMaxCaptureLaunchCount = 50;
inline constexpr int kMaxCaptureLaunchSkip = 1'000'000;
inline constexpr char kDefaultNcuSet[] = "basic";
inline constexpr int kMaxCaptureTextBytes = 256;

// ncu: set "basic" and launch count 1 when unset. Nothing without a capture.
void ApplyCaptureDefaults(v1::ExperimentRequest& request);

// OK when the request asks for no capture. `uses_gpu`: the workload's spec says so.
absl::Status ValidateCapture(const v1::ExperimentRequest& request, bool uses_gpu,
                             const CaptureTools& tools);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_ADMISSION_CAPTURE_VALIDATION_H_
