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
#include "daemon/store/experiment_store.h"
#include "daemon/gpu_health/gpu_faults.h"
#include "daemon/admission/request_validation.h"
#include "daemon/scheduling/scheduler.h"
#include "daemon/store/stream_sink.h"
#include "daemon/scheduling/worker_process.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/gpus.pb.h"

namespace gpuprof::daemon {

struct ManagerOptions {
  std::string worker_binary;
  ValidationLimits limits;
  // CPU workloads (radix) that may run at once; they share the host's cores.
  int cpu_slots = 1;
  // A GPU experiment that has waited this long for busy GPUs gets the next ones that free up:
  // smaller experiments behind it stop being started on GPUs until it runs.
  absl::Duration gpu_reservation_after = absl::Minutes(2);
  // An idle worker kept for reuse on the same GPUs is stopped after this long.
  absl::Duration worker_idle_timeout = absl::Seconds(60);
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
};

// Who asks, as the gRPC layer authenticated them.
struct Actor {
  std::string user;
  std::string authenticated_by;
  bool admin = false;
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

class ExperimentManager;

// What admission took for one request (a submit or a whole sweep), in the same critical
// section as the quota check: `places` queue places of `user`'s quota and, unless the actor is
// exempt, a submit token of the actor's. Held until the experiments are queued; whatever was
// not used is given back when it is destroyed (a request that was never stored).
class Admission {
 public:
  Admission() = default;
  Admission(Admission&& other) noexcept { *this = std::move(other); }
  Admission& operator=(Admission&& other) noexcept;
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;
  ~Admission();

  int places() const { return places_; }

 private:
  friend class ExperimentManager;
  void GiveBack();

  ExperimentManager* manager_ = nullptr;
  std::string user_;
  int places_ = 0;
  // The actor whose submit token was taken; empty if none.
  std::string token_of_;
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

  // Checks the actor may submit it (request.user other than the actor's own name needs an
  // admin; quotas of the experiment's user unless the actor is an admin), validates, stores
  // (durably), queues and audits it; returns the experiment as queued.
  absl::StatusOr<v1::Experiment> Submit(v1::ExperimentRequest request, const Actor& actor);
  // As an admin named after request.user (in-process callers).
  absl::StatusOr<v1::Experiment> Submit(v1::ExperimentRequest request);
  // Submit's checks alone (with defaults applied), storing nothing.
  absl::Status Validate(v1::ExperimentRequest request);
  // Submit for point `point` of sweep `sweep_id`: the experiment records both (stored with
  // the sweep's link in one transaction), and its sweep holds at most `max_concurrent_gpus`
  // GPUs at once (0: no cap).
  absl::StatusOr<v1::Experiment> SubmitSweepPoint(v1::ExperimentRequest request,
                                                  const std::string& sweep_id, int point,
                                                  int max_concurrent_gpus);
  // SubmitSweepPoint for points 0..n-1 of a new sweep, stored in one transaction: all are
  // queued or none is. `admission` (from AdmitSweep) holds their queue places until they are
  // queued; the store's commit is made without the manager's lock.
  absl::StatusOr<std::vector<v1::Experiment>> SubmitSweepPoints(
      std::vector<v1::ExperimentRequest> requests, const std::string& sweep_id,
      int max_concurrent_gpus, const Actor& actor, Admission admission);
  // Whether `actor` may submit these points of a sweep for `user`, as Submit decides for one
  // experiment: on behalf of another user needs an admin; the sweep is one submission for the
  // rate limit; each point must fit the per-request quotas and all of them together
  // max_queued_experiments. Applies the quota's timeout cap to points without a timeout.
  // The check and the taking of the token and of every point's queue place are one step: the
  // returned Admission holds them. A refusal takes nothing and is audited and counted like
  // Submit's.
  absl::StatusOr<Admission> AdmitSweep(std::vector<v1::ExperimentRequest>& requests,
                                       const std::string& user, const Actor& actor);
  // PERMISSION_DENIED or RESOURCE_EXHAUSTED `status`, recorded as a refusal (metric, audit).
  absl::Status Refuse(const Actor& actor, const std::string& on_behalf_of,
                      const std::string& reason, absl::Status status);
  // Replaces the listener (nullptr removes it); see SweepPointListener.
  void SetSweepPointListener(SweepPointListener listener);
  ExperimentStore& store() { return *store_; }
  // Replays stored events with seq >= from_seq to `sink`, then live ones; returns a handle for
  // Unsubscribe. For an experiment that already ended, the replay is followed by OnEnd (and 0
  // is returned). A live stream takes a place of `watcher`'s in watch_slots(): refused with
  // RESOURCE_EXHAUSTED naming the cap when none is left.
  absl::StatusOr<int64_t> Subscribe(const std::string& id, int64_t from_seq,
                                    std::shared_ptr<EventSink> sink, const Watcher& watcher);
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
  // The user's limits (from the policy) and use now.
  absl::StatusOr<v1::QuotaReport> QuotaOf(const std::string& user, bool admin);
  // Use by each user with a `users` entry in the policy, then everyone else as kOtherUsers.
  std::vector<v1::QuotaReport> QuotaUseForMetrics();
  absl::StatusOr<std::vector<v1::AuditEntry>> Audit(const v1::ListAuditRequest& request);
  // Records an entry (time filled in); failures are logged, not returned.
  void RecordAudit(v1::AuditEntry entry);
  absl::StatusOr<v1::Experiment> Get(const std::string& id);
  absl::StatusOr<ExperimentPage> List(const ExperimentFilter& filter, int page_size,
                                      const std::string& page_token);
  v1::ListGpusResponse ListGpus();

  int64_t queued_count();
  // GPU index -> whether leased, for the metrics exporter.
  std::map<int, std::string> GpuLeases();
  absl::StatusOr<int64_t> StoreSizeBytes();

  // ---- GPU health (reported by daemon/gpu_health_monitor) ----

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
  friend class Admission;
  // Gives back what an admission still holds (Admission's destructor).
  void GiveBack(Admission& admission) ABSL_LOCKS_EXCLUDED(mutex_);

  struct Active {
    v1::Experiment experiment;
    std::map<int64_t, std::shared_ptr<EventSink>> sinks;
    // The workers running it, by rank: one, or one per GPU for a workload that runs one
    // process per rank.
    std::vector<int64_t> slots;
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
  };
  struct WorkerSlot {
    std::unique_ptr<WorkerProcess> process;
    // What the worker sees (CUDA_VISIBLE_DEVICES): all of an experiment's GPUs, or one rank's.
    std::vector<int> gpus;
    // For a rank of a group: the group's GPUs in rank order, and this worker's rank in it.
    std::vector<int> group_gpus;
    int rank = 0;
    std::string experiment_id;  // empty while idle
    int experiments_run = 0;
    absl::Time idle_since;
    // When the worker last reported anything for its current experiment.
    absl::Time last_report;
  };

  ExperimentManager(ManagerOptions options, std::unique_ptr<ExperimentStore> store,
                    ManagerObserver* observer);
  absl::Status Probe();
  absl::StatusOr<v1::Experiment> SubmitInternal(v1::ExperimentRequest request, const Actor& actor,
                                                const std::string& sweep_id, int point,
                                                int max_concurrent_gpus);
  // The admission step of Submit and AdmitSweep, under one lock: the rate limit (unless the
  // actor is an admin), then, with a quota, each request's per-request limits and their sum
  // against the usage quotas, counting queued experiments and places already reserved; then
  // takes the token and requests.size() places. `requests` have their defaults applied. A
  // refusal (`for_sweep`: its message names the point) takes nothing and is audited.
  absl::StatusOr<Admission> Admit(const Actor& actor, const std::string& user,
                                  const std::optional<ResolvedQuota>& quota,
                                  const std::vector<v1::ExperimentRequest>& requests,
                                  bool for_sweep) ABSL_LOCKS_EXCLUDED(mutex_);
  // The places of an admission whose experiments are now queued (the token stays taken).
  void SettleLocked(Admission& admission) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // GPU-hours `user`'s experiments used over the 24 hours before `now`.
  absl::StatusOr<double> GpuHoursLastDay(const std::string& user, absl::Time now);
  // A request without a timeout gets the daemon's default capped by the quota's max_timeout.
  void ApplyQuotaTimeout(const ResolvedQuota& quota, v1::ExperimentRequest& request) const;
  // PERMISSION_DENIED naming the quota a single request exceeds (priority, timeout, GPUs).
  absl::Status CheckRequestQuota(const v1::ExperimentRequest& request, const std::string& user,
                                 const ResolvedQuota& quota);
  // RESOURCE_EXHAUSTED naming the quota, its value and the use, when `adding` more queued
  // experiments (or any GPU use, if `needs_gpus`) would exceed it.
  absl::Status CheckUsageQuotaLocked(const std::string& user, const ResolvedQuota& quota,
                                     int adding, bool needs_gpus)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // "quota:max_priority" and so on, for the refusal metric and the audit trail.
  static std::string QuotaReason(const absl::Status& refusal);
  absl::Status Recover() ABSL_LOCKS_EXCLUDED(mutex_);
  // Drains the GPUs the store says an admin has not cleared yet.
  absl::Status RestoreDrainedGpus() ABSL_LOCKS_EXCLUDED(mutex_);
  // Fails the experiment running on `fault.gpu`, if any, with the fault as its reason.
  void FailExperimentOnGpuLocked(const GpuFault& fault, const std::string& consequence)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // ListGpus' health fields of one GPU.
  void FillGpuHealthLocked(v1::GpuInfo& gpu) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void ControlLoop() ABSL_LOCKS_EXCLUDED(mutex_);

  void StartLocked(const Dispatch& dispatch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // One worker for `gpus`, or with `one_per_rank` one worker per GPU (rank r on gpus[r]);
  // reused when idle workers hold exactly that arrangement already.
  absl::StatusOr<std::vector<int64_t>> AcquireWorkersLocked(const std::vector<int>& gpus,
                                                            bool one_per_rank, bool& reused)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::StatusOr<int64_t> StartWorkerLocked(const std::vector<int>& gpus)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Sends every rank its assignment (with the group's NCCL id when it has one).
  void AssignRanksLocked(Active& active, const std::string& nccl_unique_id, bool reused)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Kills every worker still running `active`; their exits free the lease.
  void KillWorkersLocked(const Active& active) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // "; at the deadline: rank 0 (GPU 0, pid N) sleeping, last report 0.2 s before; rank 1 ...
  // stopped ..." for a group of ranks; empty for one worker.
  std::string DescribeRanksLocked(const Active& active, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Starts preemptions the policy calls for; the workers' exits finish them.
  void PreemptLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Once a preempted experiment's last worker is gone: PREEMPTED, then QUEUED in its place.
  void RequeuePreemptedLocked(Active& active) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Frees the experiment's GPUs once no worker process of it is left.
  void ReleaseIfNoWorkerLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void RetireSlotLocked(int64_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void OnWorkerReport(int64_t slot, const worker_protocol::WorkerReport& report)
      ABSL_LOCKS_EXCLUDED(mutex_);
  void OnWorkerExit(int64_t slot, const WorkerExit& exit) ABSL_LOCKS_EXCLUDED(mutex_);

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
  // Returns once no final write of `id` is in flight (the lock is let go while waiting).
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

  absl::Mutex mutex_;
  absl::CondVar wake_;
  // Signalled when a final write made without the lock (CancelQueuedLocked) is done.
  absl::CondVar final_write_done_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  SweepPointListener sweep_point_listener_ ABSL_GUARDED_BY(mutex_);
  std::unique_ptr<Scheduler> scheduler_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, Active> active_ ABSL_GUARDED_BY(mutex_);  // queued and running
  std::map<int64_t, WorkerSlot> slots_ ABSL_GUARDED_BY(mutex_);
  // Workers to destroy outside the lock, on the control thread: their destructors join
  // threads whose callbacks take the lock.
  std::vector<std::unique_ptr<WorkerProcess>> retired_ ABSL_GUARDED_BY(mutex_);
  // Writes the store refused (a full disk), oldest first, each with the experiment as it was
  // after it. The control loop retries them until they land; meanwhile no experiment starts,
  // and new events queue behind them so that the stored order stays the order they happened.
  std::vector<std::pair<v1::Experiment, v1::ExperimentEvent>> unpersisted_
      ABSL_GUARDED_BY(mutex_);
  std::string storage_error_ ABSL_GUARDED_BY(mutex_);
  int64_t next_slot_ ABSL_GUARDED_BY(mutex_) = 1;
  // Submit tokens and the queue places of requests admitted and not yet queued: the quota
  // check counts them with the queue, so parallel requests cannot all pass it.
  AdmissionLedger admission_ ABSL_GUARDED_BY(mutex_);
  // Live streams of experiments and sweeps (thread-safe on its own).
  WatchSlots watch_slots_;
  int64_t next_submit_order_ ABSL_GUARDED_BY(mutex_) = 0;
  // The JIT cache as the last worker to finish saw it (the probe's view is stale after runs).
  int64_t jit_cache_entries_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t jit_cache_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  struct GpuHealthState {
    bool watched = false;
    bool drained = false;
    std::string reason;
    absl::Time since;
    int last_xid = 0;
    int64_t xid_events = 0;
    std::optional<v1::GpuMemoryErrors> memory_errors;
  };
  std::map<int, GpuHealthState> gpu_health_ ABSL_GUARDED_BY(mutex_);  // by GPU index
  std::thread control_thread_;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_EXPERIMENT_MANAGER_H_
