#include "common/statistics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gpuprof {
namespace {

double SortedMedian(const std::vector<double>& sorted) {
  const size_t middle = sorted.size() / 2;
  return sorted.size() % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

}  // namespace

double NearestRankPercentile(const std::vector<double>& sorted_samples, double percent) {
  const size_t rank = static_cast<size_t>(std::ceil(percent / 100.0 * sorted_samples.size()));
  return sorted_samples[std::clamp<size_t>(rank, 1, sorted_samples.size()) - 1];
}

double Median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  return SortedMedian(samples);
}

SampleSummary Summarize(std::vector<double> samples) {
  SampleSummary summary;
  if (samples.empty()) return summary;
  std::sort(samples.begin(), samples.end());
  const double count = static_cast<double>(samples.size());
  summary.samples = static_cast<int64_t>(samples.size());
  summary.sum = std::accumulate(samples.begin(), samples.end(), 0.0);
  summary.mean = summary.sum / count;
  double squares = 0;
  for (double sample : samples) squares += (sample - summary.mean) * (sample - summary.mean);
  const double stddev = samples.size() > 1 ? std::sqrt(squares / (count - 1)) : 0.0;
  summary.relative_noise = summary.mean > 0 ? stddev / summary.mean : 0.0;
  summary.min = samples.front();
  summary.median = SortedMedian(samples);
  summary.p90 = NearestRankPercentile(samples, 90);
  summary.p99 = NearestRankPercentile(samples, 99);
  summary.max = samples.back();
  return summary;
}

void RunningNoise::Add(double sample) {
  ++count_;
  sum_ += sample;
  sum_of_squares_ += sample * sample;
}

double RunningNoise::relative_noise() const {
  if (count_ < 2) return 0.0;
  const double mean = sum_ / count_;
  if (mean <= 0) return 0.0;
  const double variance =
      std::max(0.0, (sum_of_squares_ - count_ * mean * mean) / static_cast<double>(count_ - 1));
  return std::sqrt(variance) / mean;
}

}  // namespace gpuprof
