#include "daemon/metrics/recent_series.h"

#include <gtest/gtest.h>

#include "absl/time/time.h"
#include "prometheus/registry.h"

namespace gpuprof::daemon {
namespace {

class RecentSeriesTest : public ::testing::Test {
 protected:
  prometheus::Registry registry_;
  prometheus::Family<prometheus::Gauge>& end_ =
      prometheus::BuildGauge().Name("test_end").Help("end").Register(registry_);
  prometheus::Family<prometheus::Gauge>& figure_ =
      prometheus::BuildGauge().Name("test_figure").Help("figure").Register(registry_);
  const absl::Time start_ = absl::FromUnixSeconds(1'700'000'000);
};

TEST_F(RecentSeriesTest, SeriesStayForTheWindowAfterTheRunEnded) {
  RecentSeries recent({.window = absl::Minutes(15), .max_runs = 100});
  recent.Set("exp-1", end_, {{"experiment", "exp-1"}}, 1);
  recent.Set("exp-1", figure_, {{"experiment", "exp-1"}}, 2);
  recent.Ended("exp-1", start_);
  recent.Expire(start_ + absl::Minutes(14));
  EXPECT_TRUE(end_.Has({{"experiment", "exp-1"}}));
  EXPECT_TRUE(figure_.Has({{"experiment", "exp-1"}}));
  recent.Expire(start_ + absl::Minutes(15));
  EXPECT_FALSE(end_.Has({{"experiment", "exp-1"}}));
  EXPECT_FALSE(figure_.Has({{"experiment", "exp-1"}}));
  EXPECT_EQ(recent.runs(), 0);
}

TEST_F(RecentSeriesTest, RunningRunsNeverExpire) {
  RecentSeries recent({.window = absl::Minutes(1), .max_runs = 1});
  recent.Set("exp-1", end_, {{"experiment", "exp-1"}}, 1);
  recent.Expire(start_ + absl::Hours(48));
  EXPECT_TRUE(end_.Has({{"experiment", "exp-1"}}));
}

TEST_F(RecentSeriesTest, PastMaxRunsTheFirstToEndGoFirst) {
  RecentSeries recent({.window = absl::Minutes(15), .max_runs = 2});
  for (const char* run : {"exp-1", "exp-2", "exp-3"}) {
    recent.Set(run, end_, {{"experiment", run}}, 1);
    recent.Ended(run, start_);
  }
  EXPECT_FALSE(end_.Has({{"experiment", "exp-1"}}));
  EXPECT_TRUE(end_.Has({{"experiment", "exp-2"}}));
  EXPECT_TRUE(end_.Has({{"experiment", "exp-3"}}));
  EXPECT_EQ(recent.runs(), 2);
}

TEST_F(RecentSeriesTest, SettingAFamilyAgainReplacesTheRunsSeries) {
  RecentSeries recent({});
  recent.Set("exp-1", end_, {{"experiment", "exp-1"}, {"gpus", "0"}}, 1);
  recent.Set("exp-1", end_, {{"experiment", "exp-1"}, {"gpus", "1"}}, 2);
  EXPECT_FALSE(end_.Has({{"experiment", "exp-1"}, {"gpus", "0"}}));
  EXPECT_EQ(end_.Add({{"experiment", "exp-1"}, {"gpus", "1"}}).Value(), 2);
  // Ending twice keeps the first end.
  recent.Ended("exp-1", start_);
  recent.Ended("exp-1", start_ + absl::Hours(1));
  recent.Expire(start_ + absl::Minutes(15));
  EXPECT_EQ(recent.runs(), 0);
}

TEST_F(RecentSeriesTest, AZeroWindowKeepsNoRunSeries) {
  RecentSeries recent({.window = absl::ZeroDuration(), .max_runs = 10});
  recent.Set("exp-1", end_, {{"experiment", "exp-1"}}, 1);
  EXPECT_FALSE(end_.Has({{"experiment", "exp-1"}}));
  EXPECT_EQ(recent.runs(), 0);
}

}  // namespace
}  // namespace gpuprof::daemon
