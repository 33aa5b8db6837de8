#include "daemon/metrics/recent_series.h"

namespace gpuprof::daemon {
namespace {

void RemoveSeries(prometheus::Family<prometheus::Gauge>& family,
                  const prometheus::Labels& labels) {
  if (family.Has(labels)) family.Remove(&family.Add(labels));
}

}  // namespace

void RecentSeries::Set(const std::string& run, prometheus::Family<prometheus::Gauge>& family,
                       const prometheus::Labels& labels, double value) {
  if (!enabled()) return;
  absl::MutexLock lock(&mutex_);
  Run& entry = runs_[run];
  const auto [it, inserted] = entry.series.try_emplace(&family, labels);
  if (!inserted && it->second != labels) {
    RemoveSeries(family, it->second);
    it->second = labels;
  }
  family.Add(labels).Set(value);
}

void RecentSeries::Ended(const std::string& run, absl::Time now) {
  if (!enabled()) return;
  absl::MutexLock lock(&mutex_);
  const auto it = runs_.find(run);
  if (it == runs_.end() || it->second.ended) return;
  it->second.ended = true;
  ended_.emplace_back(now, run);
  while (static_cast<int>(ended_.size()) > limits_.max_runs) {
    RemoveLocked(ended_.front().second);
    ended_.pop_front();
  }
}

void RecentSeries::Expire(absl::Time now) {
  absl::MutexLock lock(&mutex_);
  while (!ended_.empty() && ended_.front().first + limits_.window <= now) {
    RemoveLocked(ended_.front().second);
    ended_.pop_front();
  }
}

int RecentSeries::runs() const {
  absl::MutexLock lock(&mutex_);
  return static_cast<int>(runs_.size());
}

void RecentSeries::RemoveLocked(const std::string& run) {
  const auto it = runs_.find(run);
  if (it == runs_.end()) return;
  for (const auto& [family, labels] : it->second.series) RemoveSeries(*family, labels);
  runs_.erase(it);
}

}  // namespace gpuprof::daemon
