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

// ---- On a GPU: the timing loop with a memset as the workload. ----

class GpuMeasurementGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no GPU";
    for (int i = 0; i < 2; ++i) {
      auto buffer = DeviceBuffer::Allocate(kBytes);
      ASSERT_TRUE(buffer.ok()) << buffer.status();
      buffers_[i] = std::move(*buffer);
      auto stream = CudaStream::Create();
      ASSERT_TRUE(stream.ok()) << stream.status();
      streams_[i] = std::move(*stream);
    }
    cudaDeviceProp properties;
    ASSERT_EQ(cudaGetDeviceProperties(&properties, 0), cudaSuccess);
    setup_.gpu.set_l2_cache_bytes(properties.l2CacheSize);
    setup_.gpu.set_spec_peak_bandwidth_gbps(1000);
    setup_.bytes_per_launch = kBytes;  // a memset writes its bytes once
    setup_.options.set_warmup_iterations(3);
    setup_.options.set_min_iterations(5);
    setup_.options.set_max_iterations(50);
    *setup_.options.mutable_time_budget() = google::protobuf::util::TimeUtil::SecondsToDuration(5);
    setup_.options.set_noise_target(0);
  }

  TimedStream Memset(int i) {
    return TimedStream{.stream = streams_[i].get(),
                       .device = 0,
                       .launch = [this, i](cudaStream_t stream) {
                         return CudaStatus(cudaMemsetAsync(buffers_[i].data(), 1, kBytes, stream),
                                           "memset");
                       }};
  }

  absl::StatusOr<MeasurementOutcome> Measure() {
    const TimedStream streams[] = {Memset(0)};
    return MeasureStreams(setup_, streams, [](api::Phase, int64_t, int64_t, const std::string&) {});
  }

  static constexpr size_t kBytes = size_t{256} << 20;
  DeviceBuffer buffers_[2];
  CudaStream streams_[2];
  MeasurementSetup setup_;
};

TEST_F(GpuMeasurementGpuTest, StopsAtMaxIterationsWithPlausibleBandwidth) {
  auto outcome = Measure();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  const api::GpuMeasurement& measurement = outcome->measurement;
  EXPECT_EQ(measurement.stop_reason(), "max iterations");
  EXPECT_EQ(measurement.kernel_time().samples(), 50);
  EXPECT_GT(measurement.bandwidth_gbps(), 100);
  EXPECT_LT(measurement.bandwidth_gbps(), 20000);
  EXPECT_FALSE(measurement.used_cuda_graph());
}

TEST_F(GpuMeasurementGpuTest, GraphColdAndNoiseTarget) {
  setup_.options.set_graph_launches_per_sample(4);
  setup_.options.set_l2_mode(api::MeasurementOptions::L2_MODE_COLD);
  setup_.options.set_noise_target(0.5);
  auto outcome = Measure();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->measurement.used_cuda_graph());
  EXPECT_EQ(outcome->measurement.l2_mode(), api::MeasurementOptions::L2_MODE_COLD);
  EXPECT_EQ(outcome->measurement.stop_reason(), "noise target reached");
  EXPECT_EQ(outcome->measurement.kernel_time().samples(), 5);
}

TEST_F(GpuMeasurementGpuTest, EagerBatchLaunchesThatManyTimesAndReportsTimePerLaunch) {
  int launches = 0;
  const TimedStream counted{.stream = streams_[0].get(),
                            .device = 0,
                            .launch = [&](cudaStream_t stream) {
                              ++launches;
                              return CudaStatus(
                                  cudaMemsetAsync(buffers_[0].data(), 1, kBytes, stream), "memset");
                            }};
  setup_.options.set_max_iterations(5);
  auto one = MeasureStreams(setup_, {&counted, 1},
                            [](api::Phase, int64_t, int64_t, const std::string&) {});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(launches, 3 + 5);  // warm-up and timed samples, one launch each
  EXPECT_EQ(one->measurement.launches_per_sample(), 1);

  launches = 0;
  setup_.options.set_eager_launches_per_sample(8);
  auto batch = MeasureStreams(setup_, {&counted, 1},
                              [](api::Phase, int64_t, int64_t, const std::string&) {});
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(launches, 8 * (3 + 5));
  EXPECT_FALSE(batch->measurement.used_cuda_graph());
  EXPECT_EQ(batch->measurement.launches_per_sample(), 8);
  // A 256 MiB memset is GPU-bound: the time per launch of a batch is one memset's, not eight.
  const double single_us = one->measurement.kernel_time().median_us();
  const double per_launch_us = batch->measurement.kernel_time().median_us();
  EXPECT_GT(per_launch_us, 0.7 * single_us);
  EXPECT_LT(per_launch_us, 1.3 * single_us);
}

TEST_F(GpuMeasurementGpuTest, TimeBudgetStopsEarly) {
  setup_.options.set_max_iterations(1'000'000);
  *setup_.options.mutable_time_budget() =
      google::protobuf::util::TimeUtil::MillisecondsToDuration(50);
  auto outcome = Measure();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->measurement.stop_reason(), "time budget");
  EXPECT_LT(outcome->measurement.kernel_time().samples(), 1'000'000);
}

TEST_F(GpuMeasurementGpuTest, TwoStreamsAreTimedTogether) {
  auto one = Measure();
  ASSERT_TRUE(one.ok()) << one.status();
  setup_.bytes_per_launch = 2 * kBytes;
  const TimedStream streams[] = {Memset(0), Memset(1)};
  auto two =
      MeasureStreams(setup_, streams, [](api::Phase, int64_t, int64_t, const std::string&) {});
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->measurement.kernel_time().samples(), 50);
  // Both memsets share the GPU's bandwidth: the slowest stream takes longer than one alone.
  EXPECT_GT(two->measurement.kernel_time().median_us(),
            1.2 * one->measurement.kernel_time().median_us());
}

// Counts the scaffolding brackets the core opens and checks they never nest.
class CountingMarker : public ScaffoldingMarker {
 public:
  void Begin() override {
    EXPECT_FALSE(open_);
    open_ = true;
    ++begins;
  }
  void End() override {
    EXPECT_TRUE(open_);
    open_ = false;
    ++ends;
  }
  int begins = 0;
  int ends = 0;

 private:
  bool open_ = false;
};

TEST_F(GpuMeasurementGpuTest, MarksTheBlockerAndFlushOfEverySampleAndStream) {
  CountingMarker marker;
  setup_.scaffolding_marker = &marker;
  setup_.options.set_l2_mode(api::MeasurementOptions::L2_MODE_COLD);
  const TimedStream streams[] = {Memset(0), Memset(1)};
  auto outcome =
      MeasureStreams(setup_, streams, [](api::Phase, int64_t, int64_t, const std::string&) {});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  // One bracket per stream and sample; warm-up launches are the workload's only.
  EXPECT_EQ(marker.begins, 2 * outcome->measurement.kernel_time().samples());
  EXPECT_EQ(marker.ends, marker.begins);
}

}  // namespace
}  // namespace gpuprof::measure
