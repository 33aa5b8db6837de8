// Summary statistics of samples, defined once for every figure gpuprof reports: the median is
// the mean of the two middle samples for an even count; percentiles use the nearest-rank
// method (the smallest sample with at least p% of the samples at or below it).
#ifndef GPUPROF_COMMON_STATISTICS_H_
#define GPUPROF_COMMON_STATISTICS_H_

#include <cstdint>
#include <vector>

namespace gpuprof {

// All fields are zero when there are no samples.
struct SampleSummary {
  int64_t samples = 0;
  double min = 0;
  double median = 0;
  double mean = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
  double sum = 0;
  // Sample standard deviation / mean; 0 for fewer than two samples or a zero mean.
  double relative_noise = 0;
};

// Takes the samples by value and sorts that copy; move a vector in to avoid the copy.
SampleSummary Summarize(std::vector<double> samples);

// 0 for no samples.
double Median(std::vector<double> samples);

// The nearest-rank percentile of an ascending, non-empty vector, for `percent` in (0, 100].
double NearestRankPercentile(const std::vector<double>& sorted_samples, double percent);

// Running mean and relative noise, for stop conditions checked after every sample.
class RunningNoise {
 public:
  void Add(double sample);
  int64_t count() const { return count_; }
  double mean() const { return count_ > 0 ? sum_ / count_ : 0.0; }
  double relative_noise() const;

 private:
  int64_t count_ = 0;
  double sum_ = 0;
  double sum_of_squares_ = 0;
};

}  // namespace gpuprof

#endif  // GPUPROF_COMMON_STATISTICS_H_
