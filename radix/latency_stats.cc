#include "radix/latency_stats.h"

#include <utility>
#include <vector>

#include "common/statistics.h"

namespace gpuprof::radix {

LatencyStats Summarize(std::vector<int64_t> samples_ns) {
  LatencyStats stats;
  if (samples_ns.empty()) return stats;
  // The sum is measured elapsed time; int64 nanoseconds last 292 years.
  int64_t total = 0;
  for (const int64_t sample : samples_ns) total += sample;
  // Order statistics as every other figure of gpuprof defines them (common/statistics.h).
  const SampleSummary summary = ::gpuprof::Summarize(
      std::vector<double>(samples_ns.begin(), samples_ns.end()));
  stats.samples = summary.samples;
  stats.min_ns = static_cast<int64_t>(summary.min);
  stats.max_ns = static_cast<int64_t>(summary.max);
  stats.median_ns = summary.median;
  stats.p90_ns = static_cast<int64_t>(summary.p90);
  stats.p99_ns = static_cast<int64_t>(summary.p99);
  stats.total_ns = total;
  stats.mean_ns = static_cast<double>(total) / static_cast<double>(stats.samples);
  return stats;
}

}  // namespace gpuprof::radix
