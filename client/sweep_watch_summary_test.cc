#include "client/sweep_watch_summary.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpuprof/v1/sweep.pb.h"
#include "gtest/gtest.h"

namespace gpuprof::client {
namespace {

using ::testing::HasSubstr;

v1::SweepEvent Counts(int64_t seq, int total, int finished, int failed, int running) {
  v1::SweepEvent event;
  event.set_seq(seq);
  event.set_points_total(total);
  event.set_points_finished(finished);
  event.set_points_failed(failed);
  event.set_points_running(running);
  return event;
}

const absl::Time kCreated = absl::FromUnixSeconds(1'700'000'000);

TEST(SweepWatchSummaryTest, SmallSweepsAndMachineFormatsKeepEveryRow) {
  EXPECT_FALSE(SummariseSweepWatch(kMaxPointsShownOneByOne, /*table_format=*/true, false));
  EXPECT_TRUE(SummariseSweepWatch(kMaxPointsShownOneByOne + 1, true, false));
  EXPECT_FALSE(SummariseSweepWatch(10'000, /*table_format=*/false, false));
  EXPECT_FALSE(SummariseSweepWatch(10'000, true, /*every_event=*/true));
}

TEST(SweepWatchSummaryTest, CountsLineSaysWhereEveryPointIs) {
  EXPECT_EQ(SweepCountsLine(10'000, 1'180, 20, 3),
            "1200/10000 points: 1180 finished, 20 failed, 3 running, 8797 queued");
  // A tenth ended in a minute: nine minutes to go.
  EXPECT_THAT(SweepCountsLine(10'000, 1'000, 0, 8, absl::Minutes(1)),
              HasSubstr("elapsed 1m00s  ETA 9m00s"));
}

TEST(SweepWatchSummaryTest, ALineEveryHundredEndedPoints) {
  SweepWatchSummary summary(10'000, kCreated, {.every_points = 100, .every = absl::Hours(1)});
  const absl::Time now = kCreated + absl::Seconds(1);
  std::vector<std::string> lines;
  int64_t seq = 1;
  // Every point of the sweep runs and ends: two events each, 20,001 in all.
  EXPECT_FALSE(summary.OnEvent(Counts(seq++, 10'000, 0, 0, 0), now).has_value());
  for (int ended = 1; ended <= 10'000; ++ended) {
    const int failed = ended / 50;
    if (auto line = summary.OnEvent(Counts(seq++, 10'000, ended - 1 - (ended - 1) / 50,
                                           (ended - 1) / 50, 1),
                                    now)) {
      lines.push_back(*line);
    }
    if (auto line = summary.OnEvent(Counts(seq++, 10'000, ended - failed, failed, 0), now)) {
      lines.push_back(*line);
    }
  }
  // 100, 200, ... 9900: the 10,000th is the final line's.
  ASSERT_EQ(lines.size(), 99u);
  EXPECT_THAT(lines[0], HasSubstr("100/10000 points: 98 finished, 2 failed, 0 running, 9900 queued"));
  EXPECT_THAT(lines[11], HasSubstr("1200/10000 points: 1176 finished, 24 failed"));
  EXPECT_THAT(summary.FinalLine(now),
              HasSubstr("10000/10000 points: 9800 finished, 200 failed, 0 running, 0 queued"));
}

TEST(SweepWatchSummaryTest, ALineEveryFewSecondsWhenPointsEndSlowly) {
  SweepWatchSummary summary(10'000, kCreated, {.every_points = 100, .every = absl::Seconds(2)});
  absl::Time now = kCreated;
  EXPECT_FALSE(summary.OnEvent(Counts(1, 10'000, 0, 0, 4), now).has_value());
  now += absl::Seconds(1);
  EXPECT_FALSE(summary.OnEvent(Counts(2, 10'000, 1, 0, 4), now).has_value());
  now += absl::Seconds(1);
  const std::optional<std::string> line = summary.OnEvent(Counts(3, 10'000, 2, 0, 4), now);
  ASSERT_TRUE(line.has_value());
  EXPECT_THAT(*line, HasSubstr("2/10000 points: 2 finished, 0 failed, 4 running, 9994 queued"));
  // The clock starts again from the line.
  now += absl::Seconds(1);
  EXPECT_FALSE(summary.OnEvent(Counts(4, 10'000, 3, 0, 4), now).has_value());
}

TEST(SweepWatchSummaryTest, TheEventsTotalWins) {
  SweepWatchSummary summary(0, kCreated);
  summary.OnEvent(Counts(1, 300, 0, 0, 0), kCreated);
  EXPECT_THAT(summary.FinalLine(kCreated), HasSubstr("0/300 points"));
}

}  // namespace
}  // namespace gpuprof::client
