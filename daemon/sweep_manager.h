// Sweeps: a base request and axes, expanded into points that run as ordinary experiments
// through the experiment manager (so the normal fair-share queue schedules them), tracked
// durably. The sweep's own event stream (one event per change of a point) is stored like an
// experiment's and replayable. After a restart, points that never got their experiment are
// submitted, and points the stop interrupted run again.
#ifndef GPUPROF_DAEMON_SWEEP_MANAGER_H_
#define GPUPROF_DAEMON_SWEEP_MANAGER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/experiment_manager.h"
#include "daemon/store/event_fan_out.h"
#include "daemon/store/experiment_store.h"
#include "daemon/store/stream_sink.h"
#include "gpuprof/v1/sweep.pb.h"

namespace gpuprof::daemon {

using SweepEventSink = StreamSink<v1::SweepEvent>;

// What the metrics exporter wants to hear about sweeps (annotations). Called with the sweep
// manager's lock held: queue or record and return, never call back into the managers.
class SweepObserver {
 public:
  virtual ~SweepObserver() = default;
  // Submitted, or resumed running at start-up.
  virtual void SweepStarted(const v1::Sweep& sweep) {}
  // Every point ended: the sweep as it ended (state, finished, counts), without its points.
  virtual void SweepEnded(const v1::Sweep& sweep) {}
};

class SweepManager {
 public:
  // A point interrupted by daemon stops is run at most this many times in all.
  static constexpr int kMaxAttempts = 3;

  // Resumes the sweeps that were running and starts following their points. `experiments`
  // must outlive the SweepManager; call Shutdown before shutting it down. `observer` (may be
  // null) must too.
  static absl::StatusOr<std::unique_ptr<SweepManager>> Create(ExperimentManager* experiments,
                                                              SweepObserver* observer = nullptr);
  ~SweepManager();
  SweepManager(const SweepManager&) = delete;
  SweepManager& operator=(const SweepManager&) = delete;

  // Expands the axes and validates every point before anything is stored; then stores the
  // sweep and queues its points. Errors name the axis and value, or the point and field.
  // `actor` submits it: identity, the policy and the quotas apply as for
  // ExperimentManager::Submit (the points count against the user's quotas), and it is audited.
  absl::StatusOr<v1::Sweep> Submit(v1::SweepRequest request, const Actor& actor);
  // As an admin named after request.user (in-process callers).
  absl::StatusOr<v1::Sweep> Submit(v1::SweepRequest request);
  // The sweep with one page of its points (paging as GetSweepRequest's points_page_size and
  // points_page_token); Submit and Cancel return the first page too. A running sweep's points
  // come from memory, an ended one's from the store, with the same page tokens.
  absl::StatusOr<v1::Sweep> Get(const std::string& id, int points_page_size = 0,
                                const std::string& points_page_token = "");
  absl::StatusOr<SweepPage> List(const std::string& user, int page_size,
                                 const std::string& page_token);
  // Cancels every point that has not ended; the sweep ends CANCELLED.
  // Only the sweep's owner or an admin may cancel it; audited.
  absl::StatusOr<v1::Sweep> Cancel(const std::string& id, const std::string& reason,
                                   const Actor& actor);
  // As an admin (in-process callers).
  absl::StatusOr<v1::Sweep> Cancel(const std::string& id, const std::string& reason);
  // Replays stored events with seq >= from_seq, then live ones (as ExperimentManager does); a
  // live stream takes a place of `watcher`'s in the experiment manager's watch_slots(), under
  // the same caps as an experiment's streams.
  absl::StatusOr<int64_t> Subscribe(const std::string& id, int64_t from_seq,
                                    std::shared_ptr<SweepEventSink> sink, const Watcher& watcher);
  // As ExperimentManager's: one catch-up step under the lock, and stored pages without it.
  absl::StatusOr<CatchUp> CatchUpStream(const std::string& id, int64_t from_seq,
                                        const std::shared_ptr<SweepEventSink>& sink,
                                        const Watcher& watcher, int64_t& handle);
  absl::StatusOr<std::vector<v1::SweepEvent>> EventPage(const std::string& id, int64_t from_seq,
                                                        store::EventPageLimit limit);
  // Ends the stream and frees its place, also after the sweep ended.
  void Unsubscribe(const std::string& id, int64_t subscription);

  // Baselines: target_id must name an existing experiment or sweep. A new name belongs to
  // `actor`; only its owner or an admin may replace or delete it (daemon/baseline_ownership.h).
  // Every change is audited; a refusal is audited and counted as the manager's are.
  absl::StatusOr<v1::Baseline> SaveBaseline(const v1::SaveBaselineRequest& request,
                                            const Actor& actor);
  // Returns the baseline as it was.
  absl::StatusOr<v1::Baseline> DeleteBaseline(const std::string& name, const Actor& actor);
  absl::StatusOr<std::vector<v1::Baseline>> ListBaselines(const std::string& name);

  // Stops following points and ends every stream. Idempotent.
  void Shutdown();

 private:
  struct ActiveSweep {
    // Without its points: they are kept apart, and stored a row each.
    v1::Sweep sweep;
    // By index.
    std::vector<v1::SweepPoint> points;
    Subscribers<v1::SweepEvent> sinks;
  };

  SweepManager(ExperimentManager* experiments, SweepObserver* observer);
  absl::Status Resume() ABSL_LOCKS_EXCLUDED(mutex_);
  void FollowLoop() ABSL_LOCKS_EXCLUDED(mutex_, pending_mutex_);

  // Submits a new attempt of `point`; a failure fails the point.
  // `announce`: append an event for it (the first submission of a sweep does not: its
  // CREATED event already lists every point as queued).
  void SubmitPointLocked(ActiveSweep& active, int point, const v1::ExperimentRequest& request,
                         bool announce) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Applies an experiment's new state to its point; false if it changes nothing (stale).
  bool ApplyPointLocked(ActiveSweep& active, const v1::Experiment& experiment)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void OnPointChangedLocked(const v1::Experiment& experiment) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Numbers, counts, persists and fans out an event.
  void AppendEventLocked(ActiveSweep& active, v1::SweepEvent event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Ends the sweep once every point has ended.
  void MaybeEndLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  ExperimentManager* const experiments_;
  SweepObserver* const observer_;
  ExperimentStore& store_;
  // Watch streams, under the experiment manager's caps (per sweep, per user on it, per user).
  EventFanOut<v1::SweepEvent> fan_out_;

  absl::Mutex mutex_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::map<std::string, ActiveSweep> active_ ABSL_GUARDED_BY(mutex_);

  // Point changes reported by the experiment manager (under its lock), applied by FollowLoop.
  absl::Mutex pending_mutex_;
  absl::CondVar pending_changed_;
  std::deque<v1::Experiment> pending_ ABSL_GUARDED_BY(pending_mutex_);
  bool follow_stopping_ ABSL_GUARDED_BY(pending_mutex_) = false;
  std::thread follow_thread_;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_SWEEP_MANAGER_H_
