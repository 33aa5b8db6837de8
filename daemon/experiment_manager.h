// The daemon's core: accepts experiments, persists them and their events, schedules them onto
// GPU leases, runs each in a supervised worker process and fans events out to watchers.
// Every public method returns absl::Status; the gRPC layer only converts.
#ifndef GPUPROF_DAEMON_EXPERIMENT_MANAGER_H_
#define GPUPROF_DAEMON_EXPERIMENT_MANAGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/admission/access_policy.h"
#include "daemon/admission/admission.h"
#include "daemon/admission/watch_slots.h"
#include "daemon/store/experiment_store.h"
#include "daemon/gpu_health/gpu_faults.h"
#include "daemon/gpu_health/gpu_health_state.h"
#include "daemon/admission/request_validation.h"
#include "daemon/scheduling/scheduler.h"
#include "daemon/store/event_fan_out.h"
#include "daemon/store/stream_sink.h"
#include "daemon/scheduling/worker_pool.h"
#include "daemon/scheduling/worker_process.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/gpus.pb.h"

namespace gpuprof::daemon {

struct ManagerOptions {
  std::string worker_binary;
  // Niceness of the workers the daemon starts (WorkerLaunch::nice); unset: the daemon's own.
  std::optional<int> worker_nice;
  ValidationLimits limits;
  // CPU workloads (radix) that may run at once; they share the host's cores.
  int cpu_slots = 1;
  // A GPU experiment that has waited this long for busy GPUs gets the next ones that free up:
  // smaller experiments behind it stop being started on GPUs until it runs.
  absl::Duration gpu_reservation_after = absl::Minutes(2);
  // An idle worker kept for reuse on the same GPUs is stopped after this long.
  absl::Duration worker_idle_timeout = absl::Seconds(60);
  // What compiling a custom kernel may take in the worker (wall time; address space the
  // compiling child may add to what it starts with).
  absl::Duration custom_kernel_compile_timeout = absl::Seconds(60);
  int64_t custom_kernel_compile_memory_bytes = int64_t{4} << 30;
  absl::Duration probe_timeout = absl::Seconds(180);
  bool measure_copy_bandwidth = true;
  std::string version;
  // A worker reporting more than this for one experiment is flooding: it is killed and the
  // experiment fails. Every report is stored, so these bound the database too.
  int64_t max_reports_per_experiment = 1'000'000;
  int64_t max_report_bytes_per_experiment = int64_t{1} << 30;
  // Quotas come from here; null means none (in-process tests).
  const AccessControl* access = nullptr;
  // Live Watch/Submit streams one experiment (or sweep) may have; more are refused (0: no
  // cap). Part of it is kept for the owner and admins (WatchSlots::ReservedForOwner).
  int max_watchers_per_experiment = 0;
  // Live streams one non-admin user may hold on one experiment or sweep, and over all of them
  // (0: no cap).
  int max_watchers_per_user_per_experiment = 0;
  int max_watch_streams_per_user = 0;
  // Submits one (non-admin) user may make per minute, as a token bucket holding this many
  // (0: no limit).
  int submits_per_minute_per_user = 0;
  // Tests only: called on the control thread, without the manager's lock, between starting a
  // dispatched experiment's workers and committing its RUNNING event (to hold that window
  // open while a test cancels, watches or shuts down).
  std::function<void(const std::string& id)> while_starting_for_test;
};

// Receives one experiment's events. Called with the manager's lock held: implementations
// queue the event and return; they must not block or call into the manager.
using EventSink = StreamSink<v1::ExperimentEvent>;

// Hears every state change of an experiment that belongs to a sweep, with the experiment as
// it is after the change. Called with the manager's lock held: queue and return.
using SweepPointListener = std::function<void(const v1::Experiment& experiment)>;

// What the metrics exporter wants to hear about; all optional.
class ManagerObserver {
 public:
  virtual ~ManagerObserver() = default;
  // An experiment's RUNNING was published (again after a preemption), its GPUs in gpu_ids.
  virtual void ExperimentStarted(const v1::Experiment& experiment) {}
  virtual void ExperimentEnded(const v1::Experiment& experiment) {}
  virtual void WorkerFailed(bool timed_out) {}
  // A request refused by policy: reason is "quota:max_queued_experiments",
  // "not-owner", "on-behalf-of", ...
  virtual void Refused(const std::string& reason) {}
  // A running experiment was stopped for a higher-priority one and queued again.
  virtual void Preempted() {}
  // The driver reported an Xid on a GPU.
  virtual void GpuXid(int gpu, v1::GpuFaultClass fault_class) {}
};

class ExperimentManager {
 public:
  // Probes the GPUs through a worker, recovers state from the store (running experiments
  // become INTERRUPTED, queued ones queue again in order) and starts scheduling.
  static absl::StatusOr<std::unique_ptr<ExperimentManager>> Create(
      ManagerOptions options, std::unique_ptr<ExperimentStore> store,
      ManagerObserver* observer = nullptr);
  ~ExperimentManager();
  ExperimentManager(const ExperimentManager&) = delete;
  ExperimentManager& operator=(const ExperimentManager&) = delete;

  // Admits it (admission(): identity, policy, validation, quotas, its queue place), then
  // stores (durably), queues and audits it; returns the experiment as queued.
  absl::StatusOr<v1::Experiment> Submit(v1::ExperimentRequest request, const Actor& actor);
  // As an admin named after request.user (in-process callers).
  absl::StatusOr<v1::Experiment> Submit(v1::ExperimentRequest request);
  // Submit for point `point` of sweep `sweep_id`: the experiment records both (stored with
  // the sweep's link in one transaction), and its sweep holds at most `max_concurrent_gpus`
  // GPUs at once (0: no cap).
  // `rerun_of`: the point's previous attempt; if start-up found it interrupted, the new one
  // takes its place in the queue (see RecoveredRerunsQueued).
  absl::StatusOr<v1::Experiment> SubmitSweepPoint(v1::ExperimentRequest request,
                                                  const std::string& sweep_id, int point,
                                                  int max_concurrent_gpus,
                                                  const std::string& rerun_of = "");
  // Start-up found sweep points interrupted: their queue places are kept, and nothing starts,
  // until the sweep manager has queued again those it runs again and calls this (or 10 s
  // passed). Places not taken by then are let go.
  void RecoveredRerunsQueued();
  // SubmitSweepPoint for the points 0..n-1 of a new sweep that `admission` admitted (the
  // sweep manager's admission().Admit), stored in one transaction: all are queued or none is.
  // The admission holds their queue places until they are queued; the store's commit is made
  // without the manager's lock.
  absl::StatusOr<std::vector<v1::Experiment>> SubmitSweepPoints(Admission admission,
                                                                const std::string& sweep_id,
                                                                int max_concurrent_gpus);
  // Who may submit what, quotas, refusals and the audit trail; every submission passes it once
  // before anything of it is stored.
  AdmissionControl& admission() { return admission_; }
  // Replaces the listener (nullptr removes it); see SweepPointListener.
  void SetSweepPointListener(SweepPointListener listener);
  ExperimentStore& store() { return *store_; }
  // Replays stored events with seq >= from_seq to `sink`, then live ones; returns a handle for
  // Unsubscribe. For an experiment that already ended, the replay is followed by OnEnd (and 0
  // is returned). A live stream takes a place of `watcher`'s in watch_slots(): refused with
  // RESOURCE_EXHAUSTED naming the cap when none is left. The whole history is sent at once:
  // for in-process watchers; network streams use EventPage and CatchUpStream at their
  // client's pace.
  absl::StatusOr<int64_t> Subscribe(const std::string& id, int64_t from_seq,
                                    std::shared_ptr<EventSink> sink, const Watcher& watcher);
  // One step of bringing a stream up to date, under the manager's lock (see
  // EventFanOut::CatchUpTo): the events from from_seq, the stored ones and those still on
  // their way to disk, if few enough, then live ones (kLive) or the end (kEnded); kBehind,
  // with nothing sent, when the stream should read more pages first. `handle` is 0 on the
  // first call and names the stream's place after it.
  absl::StatusOr<CatchUp> CatchUpStream(const std::string& id, int64_t from_seq,
                                        const std::shared_ptr<EventSink>& sink,
                                        const Watcher& watcher, int64_t& handle);
  // Stored events from from_seq, at most `limit`, read without the manager's lock.
  absl::StatusOr<std::vector<v1::ExperimentEvent>> EventPage(const std::string& id,
                                                             int64_t from_seq,
                                                             store::EventPageLimit limit);
  // Ends the stream and frees its place, also after the experiment ended.
  void Unsubscribe(const std::string& id, int64_t subscription);
  // The live-stream caps, shared with the sweep manager's streams.
  WatchSlots& watch_slots() { return watch_slots_; }
  // Counts a refusal of watch_slots() in the refusal metric ("watch-cap:<flag>"). Not audited:
  // a flooder's every refused stream would be a durable write.
  void CountWatchRefusal(const absl::Status& refusal);
  // Only the experiment's owner or an admin may cancel it.
  absl::StatusOr<v1::Experiment> Cancel(const std::string& id, const std::string& reason,
                                        const Actor& actor);
  absl::StatusOr<std::vector<v1::AuditEntry>> Audit(const v1::ListAuditRequest& request);
  // Records an entry (time filled in); failures are logged, not returned.
  void RecordAudit(v1::AuditEntry entry);
  absl::StatusOr<v1::Experiment> Get(const std::string& id);
  absl::StatusOr<ExperimentPage> List(const ExperimentFilter& filter, int page_size,
                                      const std::string& page_token);
  v1::ListGpusResponse ListGpus();
  // The Nsight tools captures run under and where their reports are kept.
  const CaptureTools& capture_tools() const { return options_.limits.capture_tools; }

  int64_t queued_count();
  // GPU index -> whether leased, for the metrics exporter.
  std::map<int, std::string> GpuLeases();
  absl::StatusOr<int64_t> StoreSizeBytes();
  // The store's rows found damaged (their proto does not parse) and skipped, for the log and
  // a metric.
  std::vector<store::DamagedRow> DamagedStoreRows();

  // ---- GPU health (reported by gpu_health/gpu_health_monitor; kept in gpu_health_) ----

  // These GPUs' health is watched: they show HEALTHY (not "not watched") unless drained.
  void SetGpuHealthWatched(const std::vector<int>& gpus);
  // An application fault fails the experiment running on the GPU, if any; a hardware fault
  // also drains the GPU (no new leases, persisted) until ClearGpuHealth; OTHER is counted.
  void ReportGpuFault(const GpuFault& fault);
  void ReportGpuMemoryErrors(int gpu, const v1::GpuMemoryErrors& errors);
  // Returns a drained GPU to service: admins only (a refusal is audited like any other);
  // the clear is audited with `reason`.
  absl::StatusOr<v1::GpuInfo> ClearGpuHealth(int gpu, const std::string& reason,
                                             const Actor& actor);

  // Stops scheduling, interrupts running experiments, ends every stream. Idempotent.
  void Shutdown();

 private:
  struct Active {
    v1::Experiment experiment;
    Subscribers<v1::ExperimentEvent> sinks;
    // The workers running it (workers_' ids), by rank: one, or one per GPU for a workload
    // that runs one process per rank.
    std::vector<int64_t> workers;
    int ranks_finished = 0;
    absl::Time deadline = absl::InfiniteFuture();
    // Set when the workers are being killed (timeout): the final state waits for an exit so
    // the reason can carry the worker's last output.
    bool ending = false;
    // For a group of ranks that timed out: what each rank's process was doing when the
    // deadline passed, so the reason names the rank that held the others up.
    std::string ranks_at_deadline;
    // What its workers reported so far, against the flood limits.
    int64_t reports = 0;
    int64_t report_bytes = 0;
    // Its events could not be stored (full disk): the control loop stops it.
    bool storage_failed = false;
    // Set while its workers are killed for a higher-priority experiment: their exits queue it
    // again instead of failing it.
    bool preempting = false;
    std::string preempted_reason;
    // Its final event is being committed without the manager's lock (CancelQueuedLocked).
    bool final_write_in_flight = false;
    // Dispatched, and its workers are being started and its RUNNING event committed without
    // the manager's lock (StartReservedLocked): nothing else appends to it meanwhile.
    bool starting = false;
    // A worker of it that exited while it was starting: what the exit said, and its output.
    std::string exited_while_starting;
    std::string exited_while_starting_tail;
  };

  ExperimentManager(ManagerOptions options, std::unique_ptr<ExperimentStore> store,
                    ManagerObserver* observer);
  // A line of the daemon's log (stderr).
  static void Log(const std::string& line);
  absl::Status Probe();
  // Stores, queues and audits the one experiment `admission` admitted.
  // `submit_order`: its queue place, if kept for it (else the next one).
  absl::StatusOr<v1::Experiment> SubmitInternal(Admission admission, const std::string& sweep_id,
                                                int point, int max_concurrent_gpus,
                                                std::optional<int64_t> submit_order);
  // Each user's queued experiments and running GPUs, for admission's quotas.
  std::map<std::string, UserUse> UseByUser() ABSL_LOCKS_EXCLUDED(mutex_);
  absl::Status Recover() ABSL_LOCKS_EXCLUDED(mutex_);
  // Drains the GPUs the store says an admin has not cleared yet.
  absl::Status RestoreDrainedGpus() ABSL_LOCKS_EXCLUDED(mutex_);
  // Fails the experiment running on `fault.gpu`, if any, with the fault as its reason.
  void FailExperimentOnGpuLocked(const GpuFault& fault, const std::string& consequence)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void ControlLoop() ABSL_LOCKS_EXCLUDED(mutex_);

  void StartLocked(const Dispatch& dispatch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // A dispatch's start, from StartLocked (which reserves its workers and marks it starting)
  // to StartReservedLocked (which starts them and commits its RUNNING without the lock).
  struct PendingStart {
    std::string id;
    WorkerGroup group;
    v1::ExperimentEvent running;
    v1::Experiment experiment;  // as `running` leaves it
    StartedWorkers processes;
    absl::Status stored;
  };
  // Starts the workers StartLocked reserved and commits their RUNNING events with the lock let
  // go (every RPC used to wait behind a vfork, an exec and an fsync per dispatch), then
  // publishes them, handling a cancel, a stop or a worker's exit that came meanwhile.
  void StartReservedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Starts preemptions the policy calls for; the workers' exits finish them.
  void PreemptLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Once a preempted experiment's last worker is gone: PREEMPTED, then QUEUED in its place.
  void RequeuePreemptedLocked(Active& active) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Frees the experiment's GPUs once no worker process of it is left.
  void ReleaseIfNoWorkerLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void OnWorkerReport(int64_t worker, const worker_protocol::WorkerReport& report)
      ABSL_LOCKS_EXCLUDED(mutex_);
  void OnWorkerExit(int64_t worker, const WorkerExit& exit) ABSL_LOCKS_EXCLUDED(mutex_);

  // Numbers, timestamps, persists and fans out an event; a terminal state ends the experiment.
  void AppendEventLocked(Active& active, v1::ExperimentEvent event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // With `fault`, the final state event names the GPU fault that ended it.
  void EndLocked(const std::string& id, v1::ExperimentState state, const std::string& reason,
                 const std::string& stderr_tail, const GpuFault* fault = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Sends an event already numbered and stored to the watchers (and the sweep listener).
  void PublishEventLocked(Active& active, const v1::ExperimentEvent& event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Cancels a queued experiment, committing its final event and `audit` with the lock let go
  // meanwhile; returns the experiment as cancelled.
  absl::StatusOr<v1::Experiment> CancelQueuedLocked(const std::string& id, const std::string& why,
                                                    v1::AuditEntry audit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Returns once no write of `id` made without the lock is in flight: a queued cancel's final
  // event, or its start's RUNNING (the lock is let go while waiting).
  void WaitForFinalWriteLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The stored experiment, with the writes still waiting for the disk applied.
  absl::StatusOr<v1::Experiment> GetLocked(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Retries the writes the store refused; on success the backlog is empty again.
  void RetryUnpersistedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const ManagerOptions options_;
  const std::unique_ptr<ExperimentStore> store_;
  ManagerObserver* const observer_;
  v1::ListGpusResponse inventory_;  // written once by Probe, before any other thread starts
  // Takes its own lock before the manager's (UseByUser, and the queueing in Settle).
  AdmissionControl admission_;

  absl::Mutex mutex_;
  absl::CondVar wake_;
  // Signalled when a write made without the lock (CancelQueuedLocked, a start's RUNNING) is
  // done.
  absl::CondVar final_write_done_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  SweepPointListener sweep_point_listener_ ABSL_GUARDED_BY(mutex_);
  std::unique_ptr<Scheduler> scheduler_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, Active> active_ ABSL_GUARDED_BY(mutex_);  // queued and running
  // The worker processes, under mutex_ (see WorkerPool: which worker runs what changes with
  // active_ and the leases); retired ones are destroyed on the control thread, outside it.
  WorkerPool workers_ ABSL_GUARDED_BY(mutex_);
  // Drained GPUs, Xids, memory errors: its own lock, taken after mutex_ where both are held.
  GpuHealthState gpu_health_;
  // Writes the store refused (a full disk), oldest first, each with the experiment as it was
  // after it. The control loop retries them until they land; meanwhile no experiment starts,
  // and new events queue behind them so that the stored order stays the order they happened.
  std::vector<std::pair<v1::Experiment, v1::ExperimentEvent>> unpersisted_
      ABSL_GUARDED_BY(mutex_);
  std::string storage_error_ ABSL_GUARDED_BY(mutex_);
  // Live streams of experiments and sweeps (thread-safe on its own).
  WatchSlots watch_slots_;
  // Watch and Submit streams: replay, then live events, under watch_slots_.
  EventFanOut<v1::ExperimentEvent> fan_out_{
      "experiment", watch_slots_,
      [this](const absl::Status& refusal) { CountWatchRefusal(refusal); }};
  int64_t next_submit_order_ ABSL_GUARDED_BY(mutex_) = 0;
  // Dispatched this round, reserved, to be started by StartReservedLocked.
  std::vector<PendingStart> pending_starts_ ABSL_GUARDED_BY(mutex_);
  // The JIT cache as the last worker to finish saw it (the probe's view is stale after runs).
  int64_t jit_cache_entries_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t jit_cache_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  // Queue places kept at start-up for interrupted sweep points, by experiment id; the
  // scheduler dispatches nothing while they wait (RecoveredRerunsQueued).
  std::map<std::string, int64_t> rerun_orders_ ABSL_GUARDED_BY(mutex_);
  std::thread control_thread_;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_EXPERIMENT_MANAGER_H_
