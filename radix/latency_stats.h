// Summary statistics over per-operation latency samples.

#ifndef GPUPROF_RADIX_LATENCY_STATS_H_
#define GPUPROF_RADIX_LATENCY_STATS_H_

#include <cstdint>
#include <vector>

namespace gpuprof::radix {

// All fields are zero when there are no samples.
struct LatencyStats {
  int64_t samples = 0;
  int64_t min_ns = 0;
  double median_ns = 0.0;  // the mean of the middle two for an even count
  double mean_ns = 0.0;
  int64_t p90_ns = 0;
  int64_t p99_ns = 0;
  int64_t max_ns = 0;
  // Sum of all samples: the time spent in the operation, from which a
  // throughput (operations per second of operation time) follows.
  int64_t total_ns = 0;
};

// Summarizes `samples_ns` with gpuprof's statistics (common/statistics.h): percentiles by
// the nearest-rank method, the median as the mean of the middle two samples for an even count.
// Takes the samples by value; move a vector in to avoid the copy.
LatencyStats Summarize(std::vector<int64_t> samples_ns);

}  // namespace gpuprof::radix

#endif  // GPUPROF_RADIX_LATENCY_STATS_H_
