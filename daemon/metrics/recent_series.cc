#include "daemon/metrics/recent_series.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "prometheus/client_metric.h"
#include "prometheus/metric_type.h"

namespace gpuprof::daemon {

RecentSeries::Family RecentSeries::AddFamily(std::string name, std::string help) {
  absl::MutexLock lock(&mutex_);
  families_.push_back({std::move(name), std::move(help)});
  return Family{static_cast<int>(families_.size()) - 1};
}

void RecentSeries::Set(const std::string& run, Family family, prometheus::Labels labels,
                       double value) {
  if (!enabled()) return;
  absl::MutexLock lock(&mutex_);
  Series& series = runs_[run].series[family.index];
  series.labels = std::move(labels);
  series.value = value;
}

void RecentSeries::Ended(const std::string& run, absl::Time now) {
  if (!enabled()) return;
  absl::MutexLock lock(&mutex_);
  const auto it = runs_.find(run);
  if (it == runs_.end() || it->second.ended) return;
  it->second.ended = true;
  ended_.emplace_back(now, run);
  while (static_cast<int>(ended_.size()) > limits_.max_runs) {
    runs_.erase(ended_.front().second);
    ended_.pop_front();
  }
}

void RecentSeries::Expire(absl::Time now) {
  absl::MutexLock lock(&mutex_);
  while (!ended_.empty() && ended_.front().first + limits_.window <= now) {
    runs_.erase(ended_.front().second);
    ended_.pop_front();
  }
}

std::vector<prometheus::MetricFamily> RecentSeries::Collect() const {
  absl::MutexLock lock(&mutex_);
  std::vector<prometheus::MetricFamily> families(families_.size());
  for (size_t i = 0; i < families_.size(); ++i) {
    families[i].name = families_[i].name;
    families[i].help = families_[i].help;
    families[i].type = prometheus::MetricType::Gauge;
  }
  for (const auto& [run, entry] : runs_) {
    for (const auto& [index, series] : entry.series) {
      prometheus::ClientMetric& metric = families[index].metric.emplace_back();
      metric.label.reserve(series.labels.size());
      for (const auto& [name, value] : series.labels) metric.label.push_back({name, value});
      metric.gauge.value = series.value;
    }
  }
  return families;
}

int RecentSeries::runs() const {
  absl::MutexLock lock(&mutex_);
  return static_cast<int>(runs_.size());
}

std::optional<double> RecentSeries::Value(Family family, const prometheus::Labels& labels) const {
  absl::MutexLock lock(&mutex_);
  for (const auto& [run, entry] : runs_) {
    const auto it = entry.series.find(family.index);
    if (it != entry.series.end() && it->second.labels == labels) return it->second.value;
  }
  return std::nullopt;
}

}  // namespace gpuprof::daemon
