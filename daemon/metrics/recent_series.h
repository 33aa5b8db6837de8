// Series of one run (an experiment or a sweep) that carry its id, kept for a window after the
// run ended and then removed, so that Prometheus sees every run, even twenty that end between
// two scrapes, while the number of series stays bounded: at most `max_runs` runs that ended
// (the oldest go first when more end within the window), plus those still running, which the
// machine bounds (GPUs and CPU slots; sweeps with points queued).
#ifndef GPUPROF_DAEMON_METRICS_RECENT_SERIES_H_
#define GPUPROF_DAEMON_METRICS_RECENT_SERIES_H_

#include <deque>
#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/labels.h"

namespace gpuprof::daemon {

struct RecentSeriesLimits {
  // How long a run's series stay after it ended. Zero: runs get no series of their own.
  absl::Duration window = absl::Minutes(15);
  // Ended runs kept at most; beyond it the runs that ended first lose their series early.
  int max_runs = 2000;
};

// Thread-safe; never blocks on anything but its own lock.
class RecentSeries {
 public:
  explicit RecentSeries(RecentSeriesLimits limits) : limits_(limits) {}
  RecentSeries(const RecentSeries&) = delete;
  RecentSeries& operator=(const RecentSeries&) = delete;

  bool enabled() const { return limits_.window > absl::ZeroDuration() && limits_.max_runs > 0; }
  const RecentSeriesLimits& limits() const { return limits_; }

  // Sets family{labels} to `value` as run `run`'s series of that family: one per run and
  // family, so that setting it again with other labels replaces the earlier series.
  void Set(const std::string& run, prometheus::Family<prometheus::Gauge>& family,
           const prometheus::Labels& labels, double value);
  // The run ended now: its series go once the window has passed (or sooner, past max_runs).
  // A run that already ended keeps its first end.
  void Ended(const std::string& run, absl::Time now);
  // Removes the series of runs that ended a window or more before `now`.
  void Expire(absl::Time now);

  // Runs with series now, ended or not (tests).
  int runs() const;

 private:
  struct Run {
    std::map<prometheus::Family<prometheus::Gauge>*, prometheus::Labels> series;
    bool ended = false;
  };
  void RemoveLocked(const std::string& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const RecentSeriesLimits limits_;
  mutable absl::Mutex mutex_;
  std::map<std::string, Run> runs_ ABSL_GUARDED_BY(mutex_);
  // Ended runs in the order they ended, with when.
  std::deque<std::pair<absl::Time, std::string>> ended_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_METRICS_RECENT_SERIES_H_
