#include "measure/timing_loop.h"

#include <cuda_runtime_api.h>

#include <cstdlib>

#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "measure/l2_flush.h"
#include "measure/throttling.h"

namespace gpuprof::measure {
namespace {

namespace api = ::gpuprof::v1;
using ::testing::HasSubstr;

TEST(ComputeTimingStatsTest, OrderStatisticsAndNoise) {
  std::vector<double> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(i);
  const api::TimingStats stats = ComputeTimingStats(samples);
  EXPECT_EQ(stats.samples(), 100);
  EXPECT_DOUBLE_EQ(stats.min_us(), 1);
  EXPECT_DOUBLE_EQ(stats.median_us(), 50.5);
  EXPECT_DOUBLE_EQ(stats.mean_us(), 50.5);
  EXPECT_DOUBLE_EQ(stats.p90_us(), 90);
  EXPECT_DOUBLE_EQ(stats.p99_us(), 99);
  EXPECT_DOUBLE_EQ(stats.max_us(), 100);
  EXPECT_NEAR(stats.relative_noise(), 29.0115 / 50.5, 1e-4);
}

TEST(ComputeTimingStatsTest, OneSampleAndNone) {
  const api::TimingStats one = ComputeTimingStats({7.5});
  EXPECT_EQ(one.samples(), 1);
  EXPECT_DOUBLE_EQ(one.p99_us(), 7.5);
  EXPECT_DOUBLE_EQ(one.relative_noise(), 0);
  EXPECT_EQ(ComputeTimingStats({}).samples(), 0);
}

TEST(FillBandwidthTest, PercentOfSpecAndOfMeasuredCopy) {
  api::GpuMeasurement measurement;
  // 3 GB in 1 ms: 3000 GB/s.
  FillBandwidth(3'000'000'000, 1000.0, 4000.0, 3300.0, measurement);
  EXPECT_EQ(measurement.bytes_moved(), 3'000'000'000);
  EXPECT_DOUBLE_EQ(measurement.bandwidth_gbps(), 3000.0);
  EXPECT_DOUBLE_EQ(measurement.pct_of_spec_peak_bandwidth(), 75.0);
  EXPECT_NEAR(measurement.pct_of_measured_copy_bandwidth(), 90.909, 1e-3);

  api::GpuMeasurement unknown_copy;
  FillBandwidth(1000, 1.0, 0, 0, unknown_copy);
  EXPECT_DOUBLE_EQ(unknown_copy.bandwidth_gbps(), 1.0);
  EXPECT_EQ(unknown_copy.pct_of_spec_peak_bandwidth(), 0);
  EXPECT_EQ(unknown_copy.pct_of_measured_copy_bandwidth(), 0);
}

TEST(FillFlopsTest, TflopsAndPercentOfPeak) {
  api::GpuMeasurement measurement;
  // 2e12 FLOP in 10 ms: 200 TFLOP/s, 25% of 800.
  FillFlops(2e12, 10'000.0, 800.0, measurement);
  EXPECT_DOUBLE_EQ(measurement.flops(), 2e12);
  EXPECT_DOUBLE_EQ(measurement.tflops(), 200.0);
  EXPECT_DOUBLE_EQ(measurement.pct_of_spec_peak_flops(), 25.0);
  api::GpuMeasurement none;
  FillFlops(0, 10.0, 800.0, none);
  EXPECT_EQ(none.tflops(), 0);
}

TEST(DescribeTimingDriftTest, FlagsARiseOnlyPastTheThreshold) {
  std::vector<double> steady(100, 10.0);
  EXPECT_EQ(DescribeTimingDrift(steady), "");
  std::vector<double> rising(100, 10.0);
  for (int i = 75; i < 100; ++i) rising[i] = 12.0;
  EXPECT_THAT(DescribeTimingDrift(rising), HasSubstr("rose 20.0%"));
  EXPECT_EQ(DescribeTimingDrift({1, 2, 3}), "");  // too few to judge
}

TEST(DescribeClockThrottlingTest, ClockDropsAndReasons) {
  EXPECT_EQ(DescribeClockThrottling(1980, 1980, 0), "");
  EXPECT_EQ(DescribeClockThrottling(1980, 1965, 0x1), "");  // idle bit, small wobble
  EXPECT_EQ(DescribeClockThrottling(1980, 1650, 0), "SM clock 1980 -> 1650 MHz");
  EXPECT_EQ(DescribeClockThrottling(1980, 1980, 0x4 | 0x40),
            "SM clock 1980 -> 1980 MHz; reasons: software power cap, hardware thermal");
}




TEST(L2FlushBytesTest, TwiceTheL2AtLeast64MiB) {
  api::GpuInfo gpu;
  gpu.set_l2_cache_bytes(50 << 20);
  EXPECT_EQ(L2FlushBytes(gpu), 100 << 20);
  gpu.set_l2_cache_bytes(4 << 20);
  EXPECT_EQ(L2FlushBytes(gpu), 64 << 20);
}

}  // namespace
}  // namespace gpuprof::measure
