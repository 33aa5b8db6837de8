// Per-kernel hardware metrics through CUPTI's range profiler (cupti_range_profiler.h) with
// metric evaluation by the profiler host API (cupti_profiler_host.h): one auto range per kernel,
// kernel replay (CUPTI saves and restores the memory a kernel touches and runs it once per pass
// until every counter is read).
//
//   ASSIGN_OR_RETURN(KernelMetricsReport report,
//                    CollectKernelMetrics({.metric_names = DefaultMetricNames(extra)},
//                                         [&] { return LaunchAndSync(); }));
//
// Needs counter permission: without it (the driver's default for non-root users) the status is
// PERMISSION_DENIED, and NotCollectedLine turns any failure into the line the result shows.
#ifndef GPUPROF_CUPTI_KERNEL_METRICS_H_
#define GPUPROF_CUPTI_KERNEL_METRICS_H_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuprof::cupti {

struct KernelMetricsOptions {
  std::vector<std::string> metric_names;
  // Ranges (kernel launches) recorded at most; later launches are not profiled.
  size_t max_kernels = 64;
};

// One profiled kernel launch, in launch order.
struct ProfiledKernel {
  // The range's name as CUPTI gives it (for auto ranges, the kernel's name).
  std::string range_name;
  absl::flat_hash_map<std::string, double> values;
};

struct KernelMetricsReport {
  std::vector<ProfiledKernel> kernels;
  // "kernel replay: each kernel ran 7 times (7 passes) to read 5 metrics on GH100"
  std::string replay_description;
  // Metric names the GPU does not support (left out), each with why.
  std::vector<std::string> unsupported_metrics;
  size_t passes = 0;
  size_t dropped_ranges = 0;
};

// The default metrics (metric_names.h) followed by `extra_metrics` not already among them.
std::vector<std::string> KernelMetricNames(const std::vector<std::string>& extra_metrics);

// Profiles every kernel that `launch` runs on the current device (it must enqueue and wait for
// them). Unsupported metrics are dropped and listed; if none is left, UNIMPLEMENTED.
absl::StatusOr<KernelMetricsReport> CollectKernelMetrics(const KernelMetricsOptions& options,
                                                         const std::function<absl::Status()>& launch);

// "hardware metrics: not collected: <why>" for ExperimentResult.not_collected, with what would
// fix it: counter permission (PERMISSION_DENIED), an unsupported GPU or configuration
// (UNIMPLEMENTED), another profiler holding the counters (UNAVAILABLE).
std::string NotCollectedLine(absl::string_view what, const absl::Status& status);

}  // namespace gpuprof::cupti

#endif  // GPUPROF_CUPTI_KERNEL_METRICS_H_
