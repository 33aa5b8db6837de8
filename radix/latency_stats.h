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
  int64_t median_ns = 0;
  double mean_ns = 0.0;
  int64_t p90_ns = 0;
  int64_t p99_ns = 0;
  int64_t max_ns = 0;
  // Sum of all samples: the time spent in the operation, from which a
  // throughput (operations per second of operation time) follows.
  int64_t total_ns = 0;
};

// Summarizes `samples_ns`. Percentiles use the nearest-rank method: the p-th
// percentile is the smallest sample with at least p% of samples at or below
// it (so the median of an even count is the lower middle sample). Takes the
// samples by value and sorts that copy; move a vector in to avoid the copy.
LatencyStats Summarize(std::vector<int64_t> samples_ns);

// The nearest-rank percentile of an ascending, non-empty vector, for `percent`
// in (0, 100].
int64_t NearestRankPercentile(const std::vector<int64_t>& sorted_samples, double percent);

}  // namespace gpuprof::radix

#endif  // GPUPROF_RADIX_LATENCY_STATS_H_
