#include "daemon/metrics/latency_phases.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "prometheus/metric_family.h"

namespace gpuprof::daemon {
namespace {

// The histogram of `family` whose `phase` label is `phase` (any, for a family without labels).
const prometheus::ClientMetric::Histogram* Find(const std::vector<prometheus::MetricFamily>& all,
                                                const std::string& family,
                                                const std::string& phase) {
  for (const prometheus::MetricFamily& f : all) {
    if (f.name != family) continue;
    for (const prometheus::ClientMetric& metric : f.metric) {
      if (phase.empty()) return &metric.histogram;
      for (const prometheus::ClientMetric::Label& label : metric.label) {
        if (label.name == "phase" && label.value == phase) return &metric.histogram;
      }
    }
  }
  return nullptr;
}

TEST(LatencyPhasesTest, EachPhaseGoesToItsOwnSeriesInSeconds) {
  auto before = LatencyPhaseRegistry()->Collect();
  const uint64_t store_before =
      Find(before, "gpuprof_submit_phase_seconds", "store")->sample_count;
  const uint64_t total_before =
      Find(before, "gpuprof_submit_phase_seconds", "total")->sample_count;

  RecordSubmitPhase(SubmitPhase::kStore, absl::Milliseconds(3));
  RecordStoreCommitPhase(StoreCommitPhase::kCommit, absl::Milliseconds(2));
  RecordStoreCommitBatch(5);
  { PhaseTimer<SubmitPhase> timer(SubmitPhase::kTotal); }

  auto after = LatencyPhaseRegistry()->Collect();
  const auto* store = Find(after, "gpuprof_submit_phase_seconds", "store");
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->sample_count, store_before + 1);
  EXPECT_GE(store->sample_sum, 0.003);
  // The timer records once, at its end.
  EXPECT_EQ(Find(after, "gpuprof_submit_phase_seconds", "total")->sample_count,
            total_before + 1);
  const auto* commit = Find(after, "gpuprof_store_commit_phase_seconds", "commit");
  ASSERT_NE(commit, nullptr);
  EXPECT_GE(commit->sample_count, 1u);
  const auto* batch = Find(after, "gpuprof_store_commit_batch_writes", "");
  ASSERT_NE(batch, nullptr);
  EXPECT_GE(batch->sample_sum, 5);
  // Every phase has its series from the start, before anything is recorded in it.
  for (const char* phase : {"pool_wait", "admission", "queue_position", "enqueue",
                            "stream_start"}) {
    EXPECT_NE(Find(after, "gpuprof_submit_phase_seconds", phase), nullptr) << phase;
  }
}

}  // namespace
}  // namespace gpuprof::daemon
