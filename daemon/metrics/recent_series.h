// Series of one run (an experiment or a sweep) that carry its id, kept for a window after the
// run ended and then removed, so that Prometheus sees every run, even twenty that end between
// two scrapes, while the number of series stays bounded: at most `max_runs` runs that ended
// (the oldest go first when more end within the window), plus those still running, which the
// machine bounds (GPUs and CPU slots; sweeps with points queued).
//
// Its own prometheus::Collectable rather than families of a Registry: a run's series are found
// and dropped by the run's id in logarithmic time, where prometheus-cpp's Family::Remove scans
// every series of the family (thousands at 500 runs a second, a measured 6% of the daemon's
// CPU, and called while the experiment manager holds its lock).
#ifndef GPUPROF_DAEMON_METRICS_RECENT_SERIES_H_
#define GPUPROF_DAEMON_METRICS_RECENT_SERIES_H_

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/collectable.h"
#include "prometheus/labels.h"
#include "prometheus/metric_family.h"

namespace gpuprof::daemon {

struct RecentSeriesLimits {
  // How long a run's series stay after it ended. Zero: runs get no series of their own.
  absl::Duration window = absl::Minutes(15);
  // Ended runs kept at most; beyond it the runs that ended first lose their series early.
  int max_runs = 2000;
};

// Thread-safe; never blocks on anything but its own lock.
class RecentSeries : public prometheus::Collectable {
 public:
  // A gauge family whose series belong to runs; made by AddFamily, valid for the object's life.
  struct Family {
    int index;
  };

  explicit RecentSeries(RecentSeriesLimits limits) : limits_(limits) {}
  RecentSeries(const RecentSeries&) = delete;
  RecentSeries& operator=(const RecentSeries&) = delete;

  bool enabled() const { return limits_.window > absl::ZeroDuration() && limits_.max_runs > 0; }
  const RecentSeriesLimits& limits() const { return limits_; }

  // Declares a gauge family; exposed (with its help) even while no run has a series in it.
  Family AddFamily(std::string name, std::string help);

  // Sets family{labels} to `value` as run `run`'s series of that family: one per run and
  // family, so that setting it again with other labels replaces the earlier series.
  void Set(const std::string& run, Family family, prometheus::Labels labels, double value);
  // The run ended now: its series go once the window has passed (or sooner, past max_runs).
  // A run that already ended keeps its first end.
  void Ended(const std::string& run, absl::Time now);
  // Removes the series of runs that ended a window or more before `now`.
  void Expire(absl::Time now);

  // Every family with the series of every run that has one, runs in id order.
  std::vector<prometheus::MetricFamily> Collect() const override;

  // Runs with series now, ended or not (tests).
  int runs() const;
  // The value of family{labels} when that series exists (tests).
  std::optional<double> Value(Family family, const prometheus::Labels& labels) const;

 private:
  struct Series {
    prometheus::Labels labels;
    double value = 0;
  };
  struct Run {
    // By family index; a run has a handful at most.
    std::map<int, Series> series;
    bool ended = false;
  };
  struct FamilyInfo {
    std::string name;
    std::string help;
  };

  const RecentSeriesLimits limits_;
  mutable absl::Mutex mutex_;
  std::vector<FamilyInfo> families_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, Run> runs_ ABSL_GUARDED_BY(mutex_);
  // Ended runs in the order they ended, with when.
  std::deque<std::pair<absl::Time, std::string>> ended_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_METRICS_RECENT_SERIES_H_
