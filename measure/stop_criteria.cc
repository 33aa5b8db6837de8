#include "measure/stop_criteria.h"

#include <algorithm>

#include "google/protobuf/util/time_util.h"

namespace gpuprof::measure {

int64_t MaxSamplesFor(const gpuprof::v1::MeasurementOptions& options) {
  const int64_t min_samples = std::max(1, options.min_iterations());
  return std::max<int64_t>(min_samples, options.max_iterations());
}

std::vector<std::unique_ptr<StopCriterion>> StopCriteriaFor(
    const gpuprof::v1::MeasurementOptions& options) {
  std::vector<std::unique_ptr<StopCriterion>> criteria;
  criteria.push_back(std::make_unique<MaxSamples>(MaxSamplesFor(options)));
  criteria.push_back(
      std::make_unique<NoiseTarget>(std::max(1, options.min_iterations()), options.noise_target()));
  criteria.push_back(std::make_unique<TimeBudget>(absl::Nanoseconds(
      google::protobuf::util::TimeUtil::DurationToNanoseconds(options.time_budget()))));
  return criteria;
}

std::string FirstStopReason(const std::vector<std::unique_ptr<StopCriterion>>& criteria,
                            const SamplingState& state) {
  for (const auto& criterion : criteria) {
    if (criterion->ShouldStop(state)) return criterion->reason();
  }
  return "";
}

}  // namespace gpuprof::measure
