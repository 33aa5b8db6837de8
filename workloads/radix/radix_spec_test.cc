#include "workloads/radix/radix_spec.h"

#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "radix/radix_workload.h"

namespace gpuprof::workloads {
namespace {

using ::google::protobuf::util::TimeUtil;

TEST(RadixPassConfigTest, UnsetOptionsTakeRadixDefaults) {
  const radix::PassConfig passes = RadixPassConfigFromOptions(v1::MeasurementOptions());
  const radix::PassConfig defaults;
  EXPECT_EQ(passes.warmup_passes, defaults.warmup_passes);
  EXPECT_EQ(passes.min_passes, defaults.min_passes);
  EXPECT_EQ(passes.max_passes, defaults.max_passes);
  EXPECT_DOUBLE_EQ(passes.min_seconds, defaults.min_seconds);
  EXPECT_DOUBLE_EQ(passes.time_budget_seconds, defaults.time_budget_seconds);
  EXPECT_DOUBLE_EQ(passes.noise_target, 0.0);  // stop at the floor
}

TEST(RadixPassConfigTest, MeasurementOptionsSetThePasses) {
  v1::MeasurementOptions options;
  options.set_warmup_iterations(2);
  options.set_min_iterations(7);
  options.set_max_iterations(9);
  *options.mutable_min_time() = TimeUtil::MillisecondsToDuration(250);
  *options.mutable_time_budget() = TimeUtil::SecondsToDuration(3);
  options.set_noise_target(0.02);
  const radix::PassConfig passes = RadixPassConfigFromOptions(options);
  EXPECT_EQ(passes.warmup_passes, 2);
  EXPECT_EQ(passes.min_passes, 7);
  EXPECT_EQ(passes.max_passes, 9);
  EXPECT_DOUBLE_EQ(passes.min_seconds, 0.25);
  EXPECT_DOUBLE_EQ(passes.time_budget_seconds, 3.0);
  EXPECT_DOUBLE_EQ(passes.noise_target, 0.02);

  // An explicit zero min_time is no time floor; a minimum above the default pass limit
  // raises the limit.
  v1::MeasurementOptions floor_only;
  *floor_only.mutable_min_time() = TimeUtil::SecondsToDuration(0);
  floor_only.set_min_iterations(5000);
  const radix::PassConfig many = RadixPassConfigFromOptions(floor_only);
  EXPECT_DOUBLE_EQ(many.min_seconds, 0.0);
  EXPECT_EQ(many.max_passes, 5000);
}

TEST(RadixMeasurementTest, GpuOnlyOptionsAreRefusedByName) {
  EXPECT_TRUE(ValidateRadixMeasurement(v1::MeasurementOptions()).ok());
  v1::MeasurementOptions options;
  options.set_l2_mode(v1::MeasurementOptions::L2_MODE_COLD);
  const absl::Status cold = ValidateRadixMeasurement(options);
  EXPECT_EQ(cold.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cold.message(),
            "measurement.l2_mode: radix runs on the CPU, where it means nothing; leave it unset");
  options = v1::MeasurementOptions();
  options.set_graph_launches_per_sample(4);
  EXPECT_EQ(ValidateRadixMeasurement(options).code(), absl::StatusCode::kInvalidArgument);
  options = v1::MeasurementOptions();
  options.set_host_inputs(true);
  EXPECT_EQ(ValidateRadixMeasurement(options).code(), absl::StatusCode::kInvalidArgument);
  // The pass options are radix's own.
  options = v1::MeasurementOptions();
  options.set_warmup_iterations(3);
  options.set_min_iterations(4);
  options.set_noise_target(0.05);
  EXPECT_TRUE(ValidateRadixMeasurement(options).ok());
}

// At admission, not in the worker: a pass limit below the floor.
TEST(RadixMeasurementTest, AMaximumBelowTheFloorIsRefused) {
  v1::MeasurementOptions options;
  options.set_max_iterations(3);
  const absl::Status below = ValidateRadixMeasurement(options);
  EXPECT_EQ(below.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(below.message(),
            "measurement.max_iterations: got 3; radix times at least 5 passes "
            "(measurement.min_iterations, unset: 5), so it must be at least that");
  options.set_min_iterations(2);
  EXPECT_TRUE(ValidateRadixMeasurement(options).ok());
  options.set_max_iterations(5);
  options.set_min_iterations(0);
  EXPECT_TRUE(ValidateRadixMeasurement(options).ok());
}

radix::RadixWorkloadConfig ShortRun(int64_t passes) {
  v1::RadixSpec spec;
  ApplyRadixDefaults(spec);
  spec.set_num_requests(200);
  radix::RadixWorkloadConfig config = RadixConfigFromSpec(spec);
  v1::MeasurementOptions options;
  options.set_warmup_iterations(1);
  options.set_min_iterations(static_cast<int32_t>(passes));
  options.set_max_iterations(static_cast<int32_t>(passes));
  config.passes = RadixPassConfigFromOptions(options);
  return config;
}

TEST(RadixResultTest, OperationsCarryTheMedianTheirPassesAndTheirNoise) {
  const radix::RadixWorkloadReport report = radix::RunRadixWorkload(ShortRun(4));
  ASSERT_EQ(report.error, "");
  const v1::RadixResult result = RadixResultFromReport(report);
  ASSERT_EQ(result.operations_size(), 3);
  const v1::OperationStats& match = result.operations(0);
  EXPECT_EQ(match.operation(), "match_prefix");
  EXPECT_EQ(match.passes(), 4);
  EXPECT_EQ(match.count(), 200);  // one pass's calls
  // A 200-request replay is shorter than a pass's 10 ms: each pass replays it several times.
  EXPECT_EQ(match.latency().samples(), 4 * 200 * report.replays_per_pass);
  EXPECT_DOUBLE_EQ(match.ops_per_second(), report.match_rate.median);
  ASSERT_TRUE(match.has_ops_per_second_relative_noise());
  EXPECT_DOUBLE_EQ(match.ops_per_second_relative_noise(), *report.match_rate.relative_noise);
  EXPECT_EQ(result.requests(), 200);
}

TEST(RadixResultTest, OnePassLeavesTheNoiseUnknown) {
  const radix::RadixWorkloadReport report = radix::RunRadixWorkload(ShortRun(1));
  ASSERT_EQ(report.error, "");
  const v1::RadixResult result = RadixResultFromReport(report);
  for (const v1::OperationStats& operation : result.operations()) {
    EXPECT_EQ(operation.passes(), 1);
    EXPECT_FALSE(operation.has_ops_per_second_relative_noise()) << operation.operation();
  }
}

}  // namespace
}  // namespace gpuprof::workloads
