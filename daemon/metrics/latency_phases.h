// Where a Submit's time goes, and a store commit's: per-phase latency histograms that the
// request path records into without a pointer being handed down to it (the service, the
// manager and the store's group commit each record their own phases), exported by
// PrometheusDaemonMetrics as gpuprof_submit_phase_seconds{phase} and
// gpuprof_store_commit_phase_seconds{phase} (docs/metrics.md). One observation is a histogram
// bucket increment under prometheus-cpp's per-series mutex: cheap beside an RPC.
#ifndef GPUPROF_DAEMON_METRICS_LATENCY_PHASES_H_
#define GPUPROF_DAEMON_METRICS_LATENCY_PHASES_H_

#include <memory>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "prometheus/registry.h"

namespace gpuprof::daemon {

enum class SubmitPhase {
  kPoolWait,     // handed to the BlockingCallPool until one of its threads runs the call
  kAdmission,    // validation, access policy and quota (the admission's Admit)
  kQueuePosition,  // the manager's lock, briefly, for the queue position of its QUEUED event
  kStore,        // the experiment's write in the store's group commit, until it is durable
  kEnqueue,      // the manager's lock and the scheduler's queue, after the commit
  kStreamStart,  // the stream's first event: replay from the store, the manager's lock
  kTotal,        // from the handler's entry to the stream's start (the acknowledgement)
};

enum class StoreCommitPhase {
  kWait,        // a write queued until its batch has committed (the batch before it too)
  kStatements,  // the batch's statements, its leader's time before COMMIT
  kCommit,      // COMMIT: the WAL's write and fsync (synchronous=FULL), a checkpoint if due
};

void RecordSubmitPhase(SubmitPhase phase, absl::Duration duration);
void RecordStoreCommitPhase(StoreCommitPhase phase, absl::Duration duration);
// Writes per batch of the group commit, for gpuprof_store_commit_batch_writes.
void RecordStoreCommitBatch(int writes);

// The registry holding these histograms, for an exporter to collect beside its own.
std::shared_ptr<prometheus::Registry> LatencyPhaseRegistry();

// Records the time from its construction to Stop() (or its destruction) as one phase.
template <typename Phase>
class PhaseTimer {
 public:
  explicit PhaseTimer(Phase phase) : phase_(phase), start_(absl::Now()) {}
  ~PhaseTimer() { Stop(); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;
  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    Record(phase_, absl::Now() - start_);
  }

 private:
  static void Record(SubmitPhase phase, absl::Duration d) { RecordSubmitPhase(phase, d); }
  static void Record(StoreCommitPhase phase, absl::Duration d) {
    RecordStoreCommitPhase(phase, d);
  }
  const Phase phase_;
  const absl::Time start_;
  bool stopped_ = false;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_METRICS_LATENCY_PHASES_H_
