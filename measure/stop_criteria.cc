#include "measure/stop_criteria.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/time_util.h"

namespace gpuprof::measure {
namespace {

absl::Duration ToAbsl(const google::protobuf::Duration& duration) {
  return absl::Nanoseconds(google::protobuf::util::TimeUtil::DurationToNanoseconds(duration));
}

int64_t MinSamplesFor(const gpuprof::v1::MeasurementOptions& options) {
  return std::max(1, options.min_iterations());
}

}  // namespace

int64_t MaxSamplesFor(const gpuprof::v1::MeasurementOptions& options) {
  return std::max<int64_t>(MinSamplesFor(options), options.max_iterations());
}

absl::Duration MinMeasuredTimeFor(const gpuprof::v1::MeasurementOptions& options) {
  return options.has_min_time() ? ToAbsl(options.min_time()) : absl::ZeroDuration();
}

std::vector<std::unique_ptr<StopCriterion>> StopCriteriaFor(
    const gpuprof::v1::MeasurementOptions& options) {
  std::vector<std::unique_ptr<StopCriterion>> criteria;
  criteria.push_back(std::make_unique<MaxSamples>(MaxSamplesFor(options)));
  criteria.push_back(std::make_unique<NoiseTarget>(
      MinSamplesFor(options), MinMeasuredTimeFor(options), options.noise_target()));
  criteria.push_back(std::make_unique<TimeBudget>(ToAbsl(options.time_budget())));
  return criteria;
}

std::string FirstStopReason(const std::vector<std::unique_ptr<StopCriterion>>& criteria,
                            const SamplingState& state) {
  for (const auto& criterion : criteria) {
    if (criterion->ShouldStop(state)) return criterion->reason();
  }
  return "";
}

std::string DescribeStop(absl::string_view rule, const SamplingState& state,
                         const gpuprof::v1::MeasurementOptions& options) {
  const double measured_ms = absl::ToDoubleMilliseconds(state.measured);
  const double noise_pct = 100 * state.relative_noise;
  const double target_pct = 100 * options.noise_target();
  if (rule == kNoiseTargetReached) {
    return absl::StrFormat("%s: %.2f%% <= %.2f%% over %d samples, %.1f ms measured", rule,
                           noise_pct, target_pct, state.samples, measured_ms);
  }
  std::string description =
      absl::StrFormat("%s: %d samples, %.1f ms measured, noise %.2f%%", rule, state.samples,
                      measured_ms, noise_pct);
  const int64_t min_samples = MinSamplesFor(options);
  const absl::Duration min_measured = MinMeasuredTimeFor(options);
  // Only the parts of the floor that were not reached.
  std::vector<std::string> short_of;
  if (state.samples < min_samples) short_of.push_back(absl::StrFormat("%d samples", min_samples));
  if (state.measured < min_measured) {
    short_of.push_back(
        absl::StrFormat("%.1f ms measured", absl::ToDoubleMilliseconds(min_measured)));
  }
  if (!short_of.empty()) {
    absl::StrAppend(&description, "; below the floor of ", absl::StrJoin(short_of, " and "));
  } else if (state.relative_noise > options.noise_target()) {
    absl::StrAppendFormat(&description, " (target %.2f%%)", target_pct);
  }
  return description;
}

}  // namespace gpuprof::measure
