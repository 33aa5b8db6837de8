// Names shared by the worker (which collects metrics into ActivityRecord.metrics) and the
// client (which renders them): the profiler metrics gpuprof asks for by default and the keys
// under which PC-sampling stall reasons are stored. CUPTI-free, so the client can include it.
#ifndef GPUPROF_CUPTI_METRIC_NAMES_H_
#define GPUPROF_CUPTI_METRIC_NAMES_H_

#include <array>
#include <string>

#include "absl/strings/string_view.h"

namespace gpuprof::cupti {

inline constexpr absl::string_view kDramThroughputPct =
    "dram__throughput.avg.pct_of_peak_sustained_elapsed";
inline constexpr absl::string_view kSmThroughputPct =
    "sm__throughput.avg.pct_of_peak_sustained_elapsed";
inline constexpr absl::string_view kAchievedOccupancyPct =
    "sm__warps_active.avg.pct_of_peak_sustained_active";
inline constexpr absl::string_view kL2HitRatePct = "lts__t_sector_hit_rate.pct";
inline constexpr absl::string_view kTensorPipePct =
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active";

// What LEVEL_METRICS collects for every kernel before TracingOptions.extra_metrics.
inline constexpr std::array<absl::string_view, 5> kDefaultKernelMetrics = {
    kDramThroughputPct, kSmThroughputPct, kAchievedOccupancyPct, kL2HitRatePct, kTensorPipePct};

// A warp stall reason's share of a kernel's PC samples, in percent, is stored in
// ActivityRecord.metrics as kStallMetricPrefix + the short reason ("long_scoreboard").
inline constexpr absl::string_view kStallMetricPrefix = "stall_pct.";
// Total PC samples behind those percentages.
inline constexpr absl::string_view kStallSampleCountMetric = "pc_sampling.samples";

inline std::string StallMetricName(absl::string_view reason) {
  return std::string(kStallMetricPrefix) + std::string(reason);
}

}  // namespace gpuprof::cupti

#endif  // GPUPROF_CUPTI_METRIC_NAMES_H_
