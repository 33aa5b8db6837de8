#include "daemon/metrics/latency_phases.h"

#include <array>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "daemon/metrics/metric_names.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace gpuprof::daemon {
namespace {

// 0.1 ms to 2.5 s: an idle machine's fsync is a fraction of a millisecond, a contended
// Submit's tail hundreds.
const prometheus::Histogram::BucketBoundaries& Buckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
  return *buckets;
}

// Never destroyed: recorded into from any thread until the process exits.
struct Histograms {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Histogram>& submit =
      prometheus::BuildHistogram()
          .Name(metric_names::kSubmitPhaseSeconds)
          .Help("Time a Submit spent in each phase until its acknowledgement")
          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& commit =
      prometheus::BuildHistogram()
          .Name(metric_names::kStoreCommitPhaseSeconds)
          .Help("Time a store write spent in each phase of the group commit")
          .Register(*registry);
  prometheus::Histogram& batch_writes =
      prometheus::BuildHistogram()
          .Name(metric_names::kStoreCommitBatchWrites)
          .Help("Writes committed together by one transaction of the group commit")
          .Register(*registry)
          .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64, 128});
  std::array<prometheus::Histogram*, 7> submit_phases = {
      &submit.Add({{"phase", "pool_wait"}}, Buckets()),
      &submit.Add({{"phase", "admission"}}, Buckets()),
      &submit.Add({{"phase", "queue_position"}}, Buckets()),
      &submit.Add({{"phase", "store"}}, Buckets()),
      &submit.Add({{"phase", "enqueue"}}, Buckets()),
      &submit.Add({{"phase", "stream_start"}}, Buckets()),
      &submit.Add({{"phase", "total"}}, Buckets()),
  };
  std::array<prometheus::Histogram*, 3> commit_phases = {
      &commit.Add({{"phase", "wait"}}, Buckets()),
      &commit.Add({{"phase", "statements"}}, Buckets()),
      &commit.Add({{"phase", "commit"}}, Buckets()),
  };
};

Histograms& TheHistograms() {
  static Histograms* histograms = new Histograms();
  return *histograms;
}

}  // namespace

void RecordSubmitPhase(SubmitPhase phase, absl::Duration duration) {
  TheHistograms().submit_phases[static_cast<int>(phase)]->Observe(
      absl::ToDoubleSeconds(duration));
}

void RecordStoreCommitPhase(StoreCommitPhase phase, absl::Duration duration) {
  TheHistograms().commit_phases[static_cast<int>(phase)]->Observe(
      absl::ToDoubleSeconds(duration));
}

void RecordStoreCommitBatch(int writes) { TheHistograms().batch_writes.Observe(writes); }

std::shared_ptr<prometheus::Registry> LatencyPhaseRegistry() { return TheHistograms().registry; }

}  // namespace gpuprof::daemon
