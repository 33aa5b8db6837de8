// When the timing loop stops: each criterion is an object checked after every sample, the
// first to fire names the rule ("max iterations", "noise target reached", "time budget").
// The noise target has a floor, as nvbench's does (min samples and min time): it may stop a
// run only once min_iterations samples adding up to min_time of measured time were taken, so
// that p99 is not simply the maximum and the noise does not rest on a handful of points. The
// time budget and max iterations still end a run below the floor.
#ifndef GPUPROF_MEASURE_STOP_CRITERIA_H_
#define GPUPROF_MEASURE_STOP_CRITERIA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::measure {

// The noise rule's reason, which DescribeStop details differently from the others.
inline constexpr absl::string_view kNoiseTargetReached = "noise target reached";

// What the loop knows after a sample.
struct SamplingState {
  int64_t samples = 0;
  double relative_noise = 0;  // stddev / mean of the samples so far
  absl::Duration elapsed;     // since the first timed sample was queued
  // The samples' own measured time summed (GPU time for event-timed work): what the floor's
  // min_time counts, so that host overhead between samples does not fill it.
  absl::Duration measured;
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

// Once at least `min_samples` (and two) samples, measured over at least `min_measured`, have
// a relative noise at or below `target`.
class NoiseTarget final : public StopCriterion {
 public:
  NoiseTarget(int64_t min_samples, absl::Duration min_measured, double target)
      : min_samples_(min_samples), min_measured_(min_measured), target_(target) {}
  bool ShouldStop(const SamplingState& state) const override {
    return state.samples >= min_samples_ && state.samples > 1 &&
           state.measured >= min_measured_ && state.relative_noise <= target_;
  }
  std::string reason() const override { return std::string(kNoiseTargetReached); }

 private:
  int64_t min_samples_;
  absl::Duration min_measured_;
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

// The floor's measured time: options.min_time as given; unset is no floor here (the daemon
// fills the request's default, 50 ms, before a run; tests that build options stay fast).
absl::Duration MinMeasuredTimeFor(const gpuprof::v1::MeasurementOptions& options);

// The reason of the first criterion that fires, or "" to go on.
std::string FirstStopReason(const std::vector<std::unique_ptr<StopCriterion>>& criteria,
                            const SamplingState& state);

// GpuMeasurement.stop_reason: the rule that fired and what the figures rest on, e.g.
// "noise target reached: 0.84% <= 1.00% over 312 samples, 52.7 ms measured"; a run that the
// budget or max iterations ended below the floor says so, as its noise is less trustworthy.
std::string DescribeStop(absl::string_view rule, const SamplingState& state,
                         const gpuprof::v1::MeasurementOptions& options);

}  // namespace gpuprof::measure

#endif  // GPUPROF_MEASURE_STOP_CRITERIA_H_
