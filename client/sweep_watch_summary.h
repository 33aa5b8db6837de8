// What `gpuprof sweep watch` prints for a sweep too large to follow point by point: a line of
// counts every so many ended points or every few seconds, instead of a row per point, and the
// counts once more at the end. A pure function of the events and the clock it is given.
#ifndef GPUPROF_CLIENT_SWEEP_WATCH_SUMMARY_H_
#define GPUPROF_CLIENT_SWEEP_WATCH_SUMMARY_H_

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "gpuprof/v1/sweep.pb.h"

namespace gpuprof::client {

// Sweeps of at most this many points are shown a row per point as before.
inline constexpr int kMaxPointsShownOneByOne = 50;

// Whether `sweep watch` summarises a sweep of `total` points (table output only: CSV, JSON
// lines and Markdown are data and keep every row), unless every event was asked for.
bool SummariseSweepWatch(int total, bool table_format, bool every_event);

// "1200/10000 points: 1180 finished, 20 failed, 3 running, 8797 queued"; with `elapsed`, its
// time and an ETA that extrapolates the time per ended point so far.
std::string SweepCountsLine(int total, int finished, int failed, int running,
                            std::optional<absl::Duration> elapsed = std::nullopt);

class SweepWatchSummary {
 public:
  struct Cadence {
    // A line once this many more points have ended...
    int every_points = 100;
    // ...or once this long has passed with something changed.
    absl::Duration every = absl::Seconds(2);
  };

  // `total`: the sweep's points (an event's points_total, when set, replaces it); `created`:
  // when the sweep was submitted, for the elapsed time and the ETA.
  SweepWatchSummary(int total, absl::Time created, Cadence cadence);
  SweepWatchSummary(int total, absl::Time created)
      : SweepWatchSummary(total, created, Cadence()) {}

  // Takes the event's counts; returns the line to print now, if one is due.
  std::optional<std::string> OnEvent(const v1::SweepEvent& event, absl::Time now);
  // The counts as they last were, for the end of the watch.
  std::string FinalLine(absl::Time now) const;

 private:
  std::string Line(absl::Time now) const;

  const Cadence cadence_;
  const absl::Time created_;
  int total_;
  int finished_ = 0;
  int failed_ = 0;
  int running_ = 0;
  // What the last printed line said, and when it was printed.
  int printed_ended_ = 0;
  absl::Time printed_at_;
};

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_SWEEP_WATCH_SUMMARY_H_
