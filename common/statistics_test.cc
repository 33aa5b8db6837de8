#include "common/statistics.h"

#include "gtest/gtest.h"

namespace gpuprof {
namespace {

TEST(StatisticsTest, EmptyIsAllZero) {
  const SampleSummary summary = Summarize({});
  EXPECT_EQ(summary.samples, 0);
  EXPECT_EQ(summary.median, 0);
  EXPECT_EQ(Median({}), 0);
}

TEST(StatisticsTest, MedianOfEvenCountIsMeanOfMiddlePair) {
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(Median({5, 1, 3}), 3);
}

TEST(StatisticsTest, PercentilesAreNearestRank) {
  std::vector<double> samples;
  for (int i = 1; i <= 100; ++i) samples.push_back(i);
  const SampleSummary summary = Summarize(samples);
  EXPECT_EQ(summary.samples, 100);
  EXPECT_DOUBLE_EQ(summary.min, 1);
  EXPECT_DOUBLE_EQ(summary.p90, 90);
  EXPECT_DOUBLE_EQ(summary.p99, 99);
  EXPECT_DOUBLE_EQ(summary.max, 100);
  EXPECT_DOUBLE_EQ(summary.mean, 50.5);
  EXPECT_DOUBLE_EQ(summary.sum, 5050);
  EXPECT_DOUBLE_EQ(NearestRankPercentile({7}, 50), 7);
}

TEST(StatisticsTest, RunningNoiseMatchesTheSummary) {
  const std::vector<double> samples = {10, 12, 11, 9, 10.5, 10.2};
  RunningNoise running;
  for (double sample : samples) running.Add(sample);
  const SampleSummary summary = Summarize(samples);
  EXPECT_EQ(running.count(), 6);
  EXPECT_NEAR(running.mean(), summary.mean, 1e-12);
  EXPECT_NEAR(running.relative_noise(), summary.relative_noise, 1e-9);
  RunningNoise single;
  single.Add(3);
  EXPECT_EQ(single.relative_noise(), 0);
}

}  // namespace
}  // namespace gpuprof
