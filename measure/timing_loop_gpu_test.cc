// On a GPU: the timing loop with a memset as the workload (graphs, cold L2, stop criteria, two
// streams).
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
using ::testing::StartsWith;

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
  EXPECT_THAT(measurement.stop_reason(), StartsWith("max iterations: 50 samples, "));
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
  EXPECT_THAT(outcome->measurement.stop_reason(), StartsWith("noise target reached: "));
  EXPECT_EQ(outcome->measurement.kernel_time().samples(), 5);
}

TEST_F(GpuMeasurementGpuTest, TheNoiseTargetWaitsForTheFloor) {
  // A noise target any run meets at once: only the floor keeps it sampling.
  setup_.options.set_noise_target(0.5);
  setup_.options.set_max_iterations(1'000'000);
  setup_.options.set_min_iterations(100);
  auto by_samples = Measure();
  ASSERT_TRUE(by_samples.ok()) << by_samples.status();
  EXPECT_EQ(by_samples->measurement.kernel_time().samples(), 100);
  EXPECT_THAT(by_samples->measurement.stop_reason(),
              StartsWith("noise target reached: "));
  EXPECT_THAT(by_samples->measurement.stop_reason(), HasSubstr(" over 100 samples, "));

  // A 256 MiB memset takes about 0.1 ms: 20 ms of measured time needs far more than 5.
  setup_.options.set_min_iterations(5);
  *setup_.options.mutable_min_time() =
      google::protobuf::util::TimeUtil::MillisecondsToDuration(20);
  auto by_time = Measure();
  ASSERT_TRUE(by_time.ok()) << by_time.status();
  const api::TimingStats& time = by_time->measurement.kernel_time();
  EXPECT_GT(time.samples(), 5);
  // The samples' sum (samples x mean) is the measured time the floor counted.
  EXPECT_GE(time.samples() * time.mean_us(), 20'000 * 0.999);
  EXPECT_THAT(by_time->measurement.stop_reason(), StartsWith("noise target reached: "));
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
  EXPECT_THAT(outcome->measurement.stop_reason(), StartsWith("time budget: "));
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
