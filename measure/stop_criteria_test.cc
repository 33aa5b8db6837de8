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

TEST(StopCriteriaTest, NoiseWaitsForTheMinimumMeasuredTime) {
  v1::MeasurementOptions options = Options(100, 10'000, 0.01, 2000);
  *options.mutable_min_time() = google::protobuf::util::TimeUtil::MillisecondsToDuration(50);
  const auto criteria = StopCriteriaFor(options);
  // 100 quiet samples of a 169 us kernel are 16.9 ms: not yet enough data.
  EXPECT_EQ(FirstStopReason(criteria, {.samples = 100, .relative_noise = 0.001,
                                       .elapsed = absl::Milliseconds(20),
                                       .measured = absl::Microseconds(16'900)}),
            "");
  // Wall time does not count: only the samples' own measured time fills the floor.
  EXPECT_EQ(FirstStopReason(criteria, {.samples = 100, .relative_noise = 0.001,
                                       .elapsed = absl::Milliseconds(500),
                                       .measured = absl::Microseconds(16'900)}),
            "");
  EXPECT_EQ(FirstStopReason(criteria, {.samples = 296, .relative_noise = 0.001,
                                       .elapsed = absl::Milliseconds(60),
                                       .measured = absl::Milliseconds(50)}),
            "noise target reached");
  // 50 ms of data from too few samples is not enough either.
  EXPECT_EQ(FirstStopReason(criteria, {.samples = 99, .relative_noise = 0.001,
                                       .elapsed = absl::Milliseconds(60),
                                       .measured = absl::Milliseconds(60)}),
            "");
}

TEST(StopCriteriaTest, TheBudgetAndMaxIterationsBoundTheFloor) {
  v1::MeasurementOptions options = Options(100, 150, 0.01, 2000);
  *options.mutable_min_time() = google::protobuf::util::TimeUtil::SecondsToDuration(10);
  const auto criteria = StopCriteriaFor(options);
  EXPECT_EQ(FirstStopReason(criteria, {.samples = 150, .relative_noise = 0.001,
                                       .elapsed = absl::Milliseconds(100),
                                       .measured = absl::Milliseconds(100)}),
            "max iterations");
  EXPECT_EQ(FirstStopReason(criteria, {.samples = 120, .relative_noise = 0.001,
                                       .elapsed = absl::Seconds(2),
                                       .measured = absl::Seconds(2)}),
            "time budget");
}

TEST(StopCriteriaTest, UnsetMinTimeIsNoFloorAndAnExplicitOneIsKept) {
  v1::MeasurementOptions options = Options(10, 100, 0.01, 2000);
  EXPECT_EQ(MinMeasuredTimeFor(options), absl::ZeroDuration());
  *options.mutable_min_time() = google::protobuf::util::TimeUtil::MillisecondsToDuration(50);
  EXPECT_EQ(MinMeasuredTimeFor(options), absl::Milliseconds(50));
}

TEST(DescribeStopTest, SaysWhichRuleAndWhatTheFiguresRestOn) {
  v1::MeasurementOptions options = Options(100, 1000, 0.01, 2000);
  *options.mutable_min_time() = google::protobuf::util::TimeUtil::MillisecondsToDuration(50);
  EXPECT_EQ(DescribeStop("noise target reached",
                         {.samples = 312, .relative_noise = 0.0084,
                          .measured = absl::Microseconds(52'700)},
                         options),
            "noise target reached: 0.84% <= 1.00% over 312 samples, 52.7 ms measured");
  EXPECT_EQ(DescribeStop("time budget",
                         {.samples = 40, .relative_noise = 0.031,
                          .measured = absl::Milliseconds(1900)},
                         options),
            "time budget: 40 samples, 1900.0 ms measured, noise 3.10%; below the floor of 100 "
            "samples");
  // Only what was short of the floor is named.
  EXPECT_EQ(DescribeStop("time budget",
                         {.samples = 400, .relative_noise = 0.031,
                          .measured = absl::Milliseconds(20)},
                         options),
            "time budget: 400 samples, 20.0 ms measured, noise 3.10%; below the floor of 50.0 ms "
            "measured");
  EXPECT_EQ(DescribeStop("time budget",
                         {.samples = 40, .relative_noise = 0.031,
                          .measured = absl::Milliseconds(20)},
                         options),
            "time budget: 40 samples, 20.0 ms measured, noise 3.10%; below the floor of 100 "
            "samples and 50.0 ms measured");
  EXPECT_EQ(DescribeStop("time budget",
                         {.samples = 400, .relative_noise = 0.031,
                          .measured = absl::Milliseconds(1900)},
                         options),
            "time budget: 400 samples, 1900.0 ms measured, noise 3.10% (target 1.00%)");
  EXPECT_EQ(DescribeStop("max iterations",
                         {.samples = 1000, .relative_noise = 0.02,
                          .measured = absl::Milliseconds(169)},
                         options),
            "max iterations: 1000 samples, 169.0 ms measured, noise 2.00% (target 1.00%)");
}

TEST(StopCriteriaTest, MaxSamplesIsNeverBelowTheMinimum) {
  EXPECT_EQ(MaxSamplesFor(Options(50, 10, 0, 1)), 50);
  EXPECT_EQ(MaxSamplesFor(Options(0, 0, 0, 1)), 1);
}

}  // namespace
}  // namespace gpuprof::measure
