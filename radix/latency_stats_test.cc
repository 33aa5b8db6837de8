#include "radix/latency_stats.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace gpuprof::radix {
namespace {

TEST(LatencyStatsTest, NoSamplesGivesZeros) {
  const LatencyStats stats = Summarize({});
  EXPECT_EQ(stats.samples, 0);
  EXPECT_EQ(stats.min_ns, 0);
  EXPECT_EQ(stats.median_ns, 0);
  EXPECT_EQ(stats.mean_ns, 0.0);
  EXPECT_EQ(stats.p90_ns, 0);
  EXPECT_EQ(stats.p99_ns, 0);
  EXPECT_EQ(stats.max_ns, 0);
  EXPECT_EQ(stats.total_ns, 0);
}

TEST(LatencyStatsTest, SingleSampleIsEveryStatistic) {
  const LatencyStats stats = Summarize({42});
  EXPECT_EQ(stats.samples, 1);
  EXPECT_EQ(stats.min_ns, 42);
  EXPECT_EQ(stats.median_ns, 42);
  EXPECT_DOUBLE_EQ(stats.mean_ns, 42.0);
  EXPECT_EQ(stats.p90_ns, 42);
  EXPECT_EQ(stats.p99_ns, 42);
  EXPECT_EQ(stats.max_ns, 42);
  EXPECT_EQ(stats.total_ns, 42);
}

TEST(LatencyStatsTest, OneToHundredInReverseOrder) {
  std::vector<int64_t> samples;
  for (int64_t value = 100; value >= 1; --value) samples.push_back(value);
  const LatencyStats stats = Summarize(samples);
  EXPECT_EQ(stats.samples, 100);
  EXPECT_EQ(stats.min_ns, 1);
  EXPECT_DOUBLE_EQ(stats.median_ns, 50.5);
  EXPECT_DOUBLE_EQ(stats.mean_ns, 50.5);
  EXPECT_EQ(stats.p90_ns, 90);
  EXPECT_EQ(stats.p99_ns, 99);
  EXPECT_EQ(stats.max_ns, 100);
  EXPECT_EQ(stats.total_ns, 5050);
}

TEST(LatencyStatsTest, NearestRankRoundsRankUp) {
  // Ten samples: p90 is rank 9, p99 is rank ceil(9.9) = 10, the median between ranks 5 and 6.
  const LatencyStats stats = Summarize({10, 20, 30, 40, 50, 60, 70, 80, 90, 1000});
  EXPECT_DOUBLE_EQ(stats.median_ns, 55);
  EXPECT_EQ(stats.p90_ns, 90);
  EXPECT_EQ(stats.p99_ns, 1000);
  EXPECT_DOUBLE_EQ(stats.mean_ns, 145.0);
}

TEST(LatencyStatsTest, MedianOfEvenCountIsTheMeanOfTheMiddlePair) {
  EXPECT_DOUBLE_EQ(Summarize({4, 1, 3, 2}).median_ns, 2.5);
}


}  // namespace
}  // namespace gpuprof::radix
