#include "radix/latency_stats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace gpuprof::radix {

int64_t NearestRankPercentile(const std::vector<int64_t>& sorted_samples, double percent) {
  if (sorted_samples.empty()) return 0;
  const double count = static_cast<double>(sorted_samples.size());
  // Rank is 1-based: ceil(p/100 * N), clamped to [1, N].
  double rank = std::ceil(percent / 100.0 * count);
  rank = std::clamp(rank, 1.0, count);
  return sorted_samples[static_cast<size_t>(rank) - 1];
}

LatencyStats Summarize(std::vector<int64_t> samples_ns) {
  LatencyStats stats;
  if (samples_ns.empty()) return stats;
  std::sort(samples_ns.begin(), samples_ns.end());

  stats.samples = static_cast<int64_t>(samples_ns.size());
  stats.min_ns = samples_ns.front();
  stats.max_ns = samples_ns.back();
  stats.median_ns = NearestRankPercentile(samples_ns, 50.0);
  stats.p90_ns = NearestRankPercentile(samples_ns, 90.0);
  stats.p99_ns = NearestRankPercentile(samples_ns, 99.0);

  // The sum is measured elapsed time; int64 nanoseconds last 292 years.
  int64_t total = 0;
  for (const int64_t sample : samples_ns) total += sample;
  stats.total_ns = total;
  stats.mean_ns = static_cast<double>(total) / static_cast<double>(stats.samples);
  return stats;
}

}  // namespace gpuprof::radix
