// When the timing loop stops: each criterion is an object checked after every sample, the
// first to fire names the reason ("max iterations", "noise target reached", "time budget").
#ifndef GPUPROF_MEASURE_STOP_CRITERIA_H_
#define GPUPROF_MEASURE_STOP_CRITERIA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::measure {

// What the loop knows after a sample.
struct SamplingState {
  int64_t samples = 0;
  double relative_noise = 0;  // stddev / mean of the samples so far
  absl::Duration elapsed;     // since the first timed sample was queued
};

class StopCriterion {
 public:
  virtual ~StopCriterion() = default;
  virtual bool ShouldStop(const SamplingState& state) const = 0;
  // Why the loop stopped, for GpuMeasurement.stop_reason.
  virtual std::string reason() const = 0;
};

// At `max_samples` samples.
class MaxSamples final : public StopCriterion {
 public:
  explicit MaxSamples(int64_t max_samples) : max_samples_(max_samples) {}
  bool ShouldStop(const SamplingState& state) const override {
    return state.samples >= max_samples_;
  }
  std::string reason() const override { return "max iterations"; }

 private:
  int64_t max_samples_;
};

// Once at least `min_samples` (and two) samples have a relative noise at or below `target`.
class NoiseTarget final : public StopCriterion {
 public:
  NoiseTarget(int64_t min_samples, double target) : min_samples_(min_samples), target_(target) {}
  bool ShouldStop(const SamplingState& state) const override {
    return state.samples >= min_samples_ && state.samples > 1 && state.relative_noise <= target_;
  }
  std::string reason() const override { return "noise target reached"; }

 private:
  int64_t min_samples_;
  double target_;
};

// When the timed phase has lasted `budget`.
class TimeBudget final : public StopCriterion {
 public:
  explicit TimeBudget(absl::Duration budget) : budget_(budget) {}
  bool ShouldStop(const SamplingState& state) const override { return state.elapsed >= budget_; }
  std::string reason() const override { return "time budget"; }

 private:
  absl::Duration budget_;
};

// The request's criteria, in the order they are checked: max iterations, noise, time budget.
std::vector<std::unique_ptr<StopCriterion>> StopCriteriaFor(
    const gpuprof::v1::MeasurementOptions& options);

// The samples the loop will take at most (for progress totals).
int64_t MaxSamplesFor(const gpuprof::v1::MeasurementOptions& options);

// The reason of the first criterion that fires, or "" to go on.
std::string FirstStopReason(const std::vector<std::unique_ptr<StopCriterion>>& criteria,
                            const SamplingState& state);

}  // namespace gpuprof::measure

#endif  // GPUPROF_MEASURE_STOP_CRITERIA_H_
