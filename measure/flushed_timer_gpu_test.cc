// On a GPU: FlushedTimer's samples, its batches behind the blocker, and its errors.
#include "measure/flushed_timer.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <thread>

#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::measure {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kBytes = int64_t{256} << 20;

class FlushedTimerGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no GPU";
    auto buffer = DeviceBuffer::Allocate(kBytes);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    buffer_ = std::move(*buffer);
    auto stream = CudaStream::Create();
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = std::move(*stream);
  }

  absl::Status Memset(int64_t bytes) {
    return CudaStatus(cudaMemsetAsync(buffer_.data(), 1, bytes, stream_.get()), "memset");
  }

  DeviceBuffer buffer_;
  CudaStream stream_;
};

TEST_F(FlushedTimerGpuTest, TimesEverySampleAcrossSeveralReleases) {
  const auto started = std::chrono::steady_clock::now();
  auto timer = FlushedTimer::Create({.max_samples = 40});
  ASSERT_TRUE(timer.ok()) << timer.status();
  EXPECT_TRUE(timer->l2_flushed());
  // 40 samples: more than one batch queued behind the blocker.
  auto times = timer->Time(
      stream_.get(), [&] { return Memset(kBytes); }, 2, 40);
  ASSERT_TRUE(times.ok()) << times.status();
  // No blocker waited out its timeout (a kernel loaded lazily behind it would make it).
  EXPECT_LT(std::chrono::steady_clock::now() - started,
            std::chrono::nanoseconds(StreamBlocker::kTimeoutNs));
  EXPECT_EQ(times->samples, 40);
  EXPECT_GT(times->min, 0);
  EXPECT_LE(times->min, times->median);
  EXPECT_LE(times->median, times->p90);
  // Writing 256 MiB takes tens of microseconds on any GPU this runs on (< 12 TB/s).
  EXPECT_GT(times->median, 20);
  // More samples than the events allow are clamped, not an error.
  times = timer->Time(
      stream_.get(), [&] { return Memset(kBytes); }, 0, 1000);
  ASSERT_TRUE(times.ok()) << times.status();
  EXPECT_EQ(times->samples, 40);
}

TEST_F(FlushedTimerGpuTest, TheHostsLaunchWorkIsNotOnTheClock) {
  auto timer = FlushedTimer::Create({.max_samples = 8});
  ASSERT_TRUE(timer.ok()) << timer.status();
  // Each launch spends 2 ms on the host before a 4 KiB memset: behind the blocker, the GPU
  // sees the launches back to back.
  auto times = timer->Time(
      stream_.get(),
      [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        return Memset(4096);
      },
      1, 8);
  ASSERT_TRUE(times.ok()) << times.status();
  EXPECT_LT(times->median, 500);
}

TEST_F(FlushedTimerGpuTest, AFailedLaunchIsReportedAndTheStreamStaysUsable) {
  auto timer = FlushedTimer::Create({.max_samples = 4});
  ASSERT_TRUE(timer.ok()) << timer.status();
  int launches = 0;
  auto failed = timer->Time(
      stream_.get(),
      [&] { return ++launches == 3 ? absl::InternalError("launch refused") : Memset(kBytes); }, 0,
      4);
  EXPECT_THAT(failed.status().message(), HasSubstr("launch refused"));
  // The blocker was released: the stream drains and the next timing works.
  ASSERT_EQ(cudaStreamSynchronize(stream_.get()), cudaSuccess);
  auto times = timer->Time(
      stream_.get(), [&] { return Memset(kBytes); }, 0, 4);
  ASSERT_TRUE(times.ok()) << times.status();
  EXPECT_EQ(times->samples, 4);
}

}  // namespace
}  // namespace gpuprof::measure
