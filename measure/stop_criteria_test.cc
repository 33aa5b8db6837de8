#include "measure/stop_criteria.h"

#include "gtest/gtest.h"
#include "google/protobuf/util/time_util.h"

namespace gpuprof::measure {
namespace {

v1::MeasurementOptions Options(int min, int max, double noise, int budget_ms) {
  v1::MeasurementOptions options;
  options.set_min_iterations(min);
  options.set_max_iterations(max);
  options.set_noise_target(noise);
  *options.mutable_time_budget() =
      google::protobuf::util::TimeUtil::MillisecondsToDuration(budget_ms);
  return options;
}

TEST(StopCriteriaTest, EachCriterionFiresOnItsOwn) {
  const auto criteria = StopCriteriaFor(Options(10, 100, 0.01, 2000));
  EXPECT_EQ(FirstStopReason(criteria, {.samples = 5, .relative_noise = 0.5,
                                       .elapsed = absl::Milliseconds(10)}),
            "");
  EXPECT_EQ(FirstStopReason(criteria, {.samples = 100, .relative_noise = 0.5,
                                       .elapsed = absl::Milliseconds(10)}),
            "max iterations");
  EXPECT_EQ(FirstStopReason(criteria, {.samples = 10, .relative_noise = 0.005,
                                       .elapsed = absl::Milliseconds(10)}),
            "noise target reached");
  EXPECT_EQ(FirstStopReason(criteria, {.samples = 11, .relative_noise = 0.5,
                                       .elapsed = absl::Seconds(2)}),
            "time budget");
}

TEST(StopCriteriaTest, NoiseNeedsTheMinimumAndTwoSamples) {
  const auto criteria = StopCriteriaFor(Options(1, 100, 0.01, 2000));
  EXPECT_EQ(FirstStopReason(criteria, {.samples = 1, .relative_noise = 0}), "");
  EXPECT_EQ(FirstStopReason(criteria, {.samples = 2, .relative_noise = 0}),
            "noise target reached");
}

TEST(StopCriteriaTest, MaxSamplesIsNeverBelowTheMinimum) {
  EXPECT_EQ(MaxSamplesFor(Options(50, 10, 0, 1)), 50);
  EXPECT_EQ(MaxSamplesFor(Options(0, 0, 0, 1)), 1);
}

}  // namespace
}  // namespace gpuprof::measure
