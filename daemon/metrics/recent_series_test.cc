#include "daemon/metrics/recent_series.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/time/time.h"
#include "prometheus/text_serializer.h"

namespace gpuprof::daemon {
namespace {

class RecentSeriesTest : public ::testing::Test {
 protected:
  bool Has(const RecentSeries& recent, RecentSeries::Family family,
           const prometheus::Labels& labels) {
    return recent.Value(family, labels).has_value();
  }

  const absl::Time start_ = absl::FromUnixSeconds(1'700'000'000);
};

TEST_F(RecentSeriesTest, SeriesStayForTheWindowAfterTheRunEnded) {
  RecentSeries recent({.window = absl::Minutes(15), .max_runs = 100});
  const RecentSeries::Family end = recent.AddFamily("test_end", "end");
  const RecentSeries::Family figure = recent.AddFamily("test_figure", "figure");
  recent.Set("exp-1", end, {{"experiment", "exp-1"}}, 1);
  recent.Set("exp-1", figure, {{"experiment", "exp-1"}}, 2);
  recent.Ended("exp-1", start_);
  recent.Expire(start_ + absl::Minutes(14));
  EXPECT_EQ(recent.Value(end, {{"experiment", "exp-1"}}), 1);
  EXPECT_EQ(recent.Value(figure, {{"experiment", "exp-1"}}), 2);
  recent.Expire(start_ + absl::Minutes(15));
  EXPECT_FALSE(Has(recent, end, {{"experiment", "exp-1"}}));
  EXPECT_FALSE(Has(recent, figure, {{"experiment", "exp-1"}}));
  EXPECT_EQ(recent.runs(), 0);
}

TEST_F(RecentSeriesTest, RunningRunsNeverExpire) {
  RecentSeries recent({.window = absl::Minutes(1), .max_runs = 1});
  const RecentSeries::Family end = recent.AddFamily("test_end", "end");
  recent.Set("exp-1", end, {{"experiment", "exp-1"}}, 1);
  recent.Expire(start_ + absl::Hours(48));
  EXPECT_TRUE(Has(recent, end, {{"experiment", "exp-1"}}));
}

TEST_F(RecentSeriesTest, PastMaxRunsTheFirstToEndGoFirst) {
  RecentSeries recent({.window = absl::Minutes(15), .max_runs = 2});
  const RecentSeries::Family end = recent.AddFamily("test_end", "end");
  for (const char* run : {"exp-1", "exp-2", "exp-3"}) {
    recent.Set(run, end, {{"experiment", run}}, 1);
    recent.Ended(run, start_);
  }
  EXPECT_FALSE(Has(recent, end, {{"experiment", "exp-1"}}));
  EXPECT_TRUE(Has(recent, end, {{"experiment", "exp-2"}}));
  EXPECT_TRUE(Has(recent, end, {{"experiment", "exp-3"}}));
  EXPECT_EQ(recent.runs(), 2);
}

TEST_F(RecentSeriesTest, SettingAFamilyAgainReplacesTheRunsSeries) {
  RecentSeries recent({});
  const RecentSeries::Family end = recent.AddFamily("test_end", "end");
  recent.Set("exp-1", end, {{"experiment", "exp-1"}, {"gpus", "0"}}, 1);
  recent.Set("exp-1", end, {{"experiment", "exp-1"}, {"gpus", "1"}}, 2);
  EXPECT_FALSE(Has(recent, end, {{"experiment", "exp-1"}, {"gpus", "0"}}));
  EXPECT_EQ(recent.Value(end, {{"experiment", "exp-1"}, {"gpus", "1"}}), 2);
  // Ending twice keeps the first end.
  recent.Ended("exp-1", start_);
  recent.Ended("exp-1", start_ + absl::Hours(1));
  recent.Expire(start_ + absl::Minutes(15));
  EXPECT_EQ(recent.runs(), 0);
}

TEST_F(RecentSeriesTest, AZeroWindowKeepsNoRunSeries) {
  RecentSeries recent({.window = absl::ZeroDuration(), .max_runs = 10});
  const RecentSeries::Family end = recent.AddFamily("test_end", "end");
  recent.Set("exp-1", end, {{"experiment", "exp-1"}}, 1);
  EXPECT_FALSE(Has(recent, end, {{"experiment", "exp-1"}}));
  EXPECT_EQ(recent.runs(), 0);
}

TEST_F(RecentSeriesTest, CollectExposesEveryFamilyAndEachRunsSeries) {
  RecentSeries recent({});
  const RecentSeries::Family start = recent.AddFamily("test_start", "When it started.");
  recent.AddFamily("test_empty", "No run has one.");
  recent.Set("exp-2", start, {{"experiment", "exp-2"}}, 20);
  recent.Set("exp-1", start, {{"experiment", "exp-1"}}, 10);
  const std::string text = prometheus::TextSerializer().Serialize(recent.Collect());
  EXPECT_EQ(text,
            "# HELP test_start When it started.\n"
            "# TYPE test_start gauge\n"
            "test_start{experiment=\"exp-1\"} 10\n"
            "test_start{experiment=\"exp-2\"} 20\n"
            "# HELP test_empty No run has one.\n"
            "# TYPE test_empty gauge\n");
}

}  // namespace
}  // namespace gpuprof::daemon
