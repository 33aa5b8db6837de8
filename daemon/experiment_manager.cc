#include "daemon/experiment_manager.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/experiment_states.h"
#include "common/status_macros.h"
#include "daemon/admission/custom_kernel_audit.h"
#include "daemon/experiment_record.h"
#include "daemon/metrics/latency_phases.h"
#include "daemon/scheduling/inventory_probe.h"
#include "google/protobuf/util/time_util.h"
#include "workloads/spec_table.h"

namespace gpuprof::daemon {
namespace {

using ::google::protobuf::util::TimeUtil;
namespace worker_protocol = ::gpuprof::worker_protocol;

// How long start-up waits for the sweep manager to queue its interrupted points again
// (RecoveredRerunsQueued) before it starts experiments all the same.
constexpr absl::Duration kRerunHold = absl::Seconds(10);

// The last time the daemon knew `experiment` running: the time of its last stored event
// (now, if that cannot be read).
google::protobuf::Timestamp LastStoredEventTime(ExperimentStore& store,
                                                const v1::Experiment& experiment) {
  const absl::StatusOr<std::vector<v1::ExperimentEvent>> last =
      store.Events(experiment.id(), experiment.last_seq());
  if (last.ok() && !last->empty() && last->back().has_time()) return last->back().time();
  return TimestampNow();
}

worker_protocol::CustomKernelLimits CustomKernelLimitsOf(const ManagerOptions& options) {
  worker_protocol::CustomKernelLimits limits;
  *limits.mutable_compile_timeout() = TimeUtil::NanosecondsToDuration(
      absl::ToInt64Nanoseconds(options.custom_kernel_compile_timeout));
  limits.set_compile_memory_bytes(options.custom_kernel_compile_memory_bytes);
  return limits;
}

}  // namespace

ExperimentManager::ExperimentManager(ManagerOptions options, std::unique_ptr<ExperimentStore> store,
                                     ManagerObserver* observer)
    : options_(std::move(options)),
      store_(std::move(store)),
      observer_(observer),
      admission_(
          AdmissionOptions{
              .limits = options_.limits,
              .access = options_.access,
              .submits_per_minute_per_user = options_.submits_per_minute_per_user,
              .use_by_user = [this] { return UseByUser(); },
              .refused =
                  [this](const std::string& reason) {
                    if (observer_ != nullptr) observer_->Refused(reason);
                  }},
          inventory_, *store_),
      workers_(
          mutex_, inventory_,
          WorkerPoolOptions{options_.worker_binary, options_.limits.allow_test_faults,
                            options_.worker_idle_timeout, CustomKernelLimitsOf(options_),
                            options_.limits.capture_tools, options_.worker_nice},
          [this](int64_t worker, const worker_protocol::WorkerReport& report) {
            OnWorkerReport(worker, report);
          },
          [this](int64_t worker, const WorkerExit& exit) { OnWorkerExit(worker, exit); },
          // Retired processes are destroyed by the control loop, outside the lock.
          [this] { wake_.Signal(); }),
      gpu_health_(*store_),
      watch_slots_(WatchLimits{options_.max_watchers_per_experiment,
                               options_.max_watchers_per_user_per_experiment,
                               options_.max_watch_streams_per_user}) {}

absl::StatusOr<std::unique_ptr<ExperimentManager>> ExperimentManager::Create(
    ManagerOptions options, std::unique_ptr<ExperimentStore> store, ManagerObserver* observer) {
  std::unique_ptr<ExperimentManager> manager(
      new ExperimentManager(std::move(options), std::move(store), observer));
  RETURN_IF_ERROR(manager->Probe());
  {
    absl::MutexLock lock(&manager->mutex_);
    manager->scheduler_ = std::make_unique<Scheduler>(GpuTopology(manager->inventory_),
                                                      std::max(1, manager->options_.cpu_slots),
                                                      manager->options_.gpu_reservation_after);
    if (const AccessControl* access = manager->options_.access; access != nullptr) {
      manager->scheduler_->SetUserGpuLimit([access](const std::string& user) {
        const ResolvedQuota quota = access->QuotaForUser(user);
        return quota.limits.has_max_concurrent_gpus() ? quota.limits.max_concurrent_gpus() : -1;
      });
    }
  }
  RETURN_IF_ERROR(manager->RestoreDrainedGpus());
  RETURN_IF_ERROR(manager->Recover());
  manager->control_thread_ = std::thread([m = manager.get()] { m->ControlLoop(); });
  return manager;
}

ExperimentManager::~ExperimentManager() { Shutdown(); }

void ExperimentManager::Log(const std::string& line) {
  std::fprintf(stderr, "gpuprofd: %s\n", line.c_str());
}

absl::Status ExperimentManager::Probe() {
  ASSIGN_OR_RETURN(inventory_,
                   ProbeInventory({.launch = {options_.worker_binary, {}, WorkerEnvironment()},
                                   .measure_copy_bandwidth = options_.measure_copy_bandwidth,
                                   .timeout = options_.probe_timeout}));
  inventory_.mutable_host()->set_gpuprof_version(options_.version);
  {
    absl::MutexLock lock(&mutex_);
    jit_cache_entries_ = inventory_.host().jit_cache_entries();
    jit_cache_bytes_ = inventory_.host().jit_cache_bytes();
  }
  Log(absl::StrCat("inventory: ", inventory_.gpus_size(), " GPU(s)",
                       inventory_.probe_error().empty() ? ""
                                                        : " (" + inventory_.probe_error() + ")",
                       "; workloads: ", absl::StrJoin(inventory_.supported_workloads(), ", ")));
  return absl::OkStatus();
}

absl::Status ExperimentManager::Recover() {
  ASSIGN_OR_RETURN(auto running, store_->ListByState(v1::RUNNING));
  std::vector<std::pair<v1::Experiment, v1::ExperimentEvent>> interrupted;
  // Sweep points among them: a sweep runs them again, in the place they had in the queue.
  std::vector<v1::Experiment> interrupted_points;
  for (auto& experiment : running) {
    if (!experiment.sweep_id().empty()) interrupted_points.push_back(experiment);
    const google::protobuf::Timestamp last_alive = LastStoredEventTime(*store_, experiment);
    interrupted.push_back(InterruptedAtRestart(std::move(experiment), last_alive));
  }
  if (!interrupted.empty()) {
    const absl::Status stored = store_->UpdateMany(interrupted);
    if (absl::IsResourceExhausted(stored)) {
      // A full disk does not keep the daemon from serving what is stored: the marks wait in
      // memory (reads see them) and the control loop stores them once the disk takes writes;
      // nothing starts before.
      Log(absl::StrCat("could not mark ", interrupted.size(),
                       " experiment(s) that were running INTERRUPTED: ", stored.message(),
                       "; retrying every second"));
      absl::MutexLock lock(&mutex_);
      storage_error_ = std::string(stored.message());
      unpersisted_.insert(unpersisted_.end(), interrupted.begin(), interrupted.end());
    } else {
      RETURN_IF_ERROR(stored);
    }
    if (observer_ != nullptr) {
      for (const auto& [experiment, event] : interrupted) observer_->ExperimentEnded(experiment);
    }
    Log(absl::StrCat(interrupted.size(), " experiment(s) were running when gpuprofd "
                         "stopped; marked INTERRUPTED"));
  }
  ASSIGN_OR_RETURN(auto queued, store_->ListByState(v1::QUEUED));
  // Preempted and not yet marked QUEUED again when the daemon stopped: queued all the same.
  ASSIGN_OR_RETURN(auto preempted, store_->ListByState(v1::PREEMPTED));
  for (auto& experiment : preempted) {
    experiment.set_state(v1::QUEUED);
    experiment.clear_started();
    experiment.clear_gpu_ids();
    queued.push_back(std::move(experiment));
  }
  const RecoveredOrders orders = RecoveredSubmitOrders(queued, interrupted_points);
  absl::MutexLock lock(&mutex_);
  rerun_orders_ = orders.interrupted;
  if (!rerun_orders_.empty()) scheduler_->HoldDispatchUntil(absl::Now() + kRerunHold);
  next_submit_order_ = orders.next;
  for (size_t index = 0; index < queued.size(); ++index) {
    v1::Experiment& experiment = queued[index];
    Active& active = active_[experiment.id()];
    active.experiment = std::move(experiment);
    // The host may have changed since the experiment was accepted.
    const absl::Status still_valid =
        ValidateExperimentRequest(active.experiment.request(), inventory_, options_.limits);
    if (!still_valid.ok()) {
      EndLocked(active.experiment.id(), v1::FAILED,
                absl::StrCat("no longer valid on this host: ", still_valid.message()), "");
      continue;
    }
    scheduler_->Enqueue(PendingExperiment{
        active.experiment.id(), active.experiment.user(), active.experiment.request().priority(),
        orders.queued[index], active.experiment.request().gpus(),
        workloads::RequiredGpuCount(active.experiment.request()), active.experiment.sweep_id(),
        active.experiment.sweep_max_concurrent_gpus()});
  }
  if (!queued.empty()) Log(absl::StrCat(queued.size(), " queued experiment(s) recovered"));
  return absl::OkStatus();
}

absl::StatusOr<v1::Experiment> ExperimentManager::Submit(v1::ExperimentRequest request) {
  const std::string user = request.user();
  return Submit(std::move(request), Actor{user, "in-process call", /*admin=*/true});
}

absl::StatusOr<v1::Experiment> ExperimentManager::Submit(v1::ExperimentRequest request,
                                                         const Actor& actor) {
  const std::string user = request.user();
  PhaseTimer admission_timer(SubmitPhase::kAdmission);
  ASSIGN_OR_RETURN(Admission admission,
                   admission_.Admit(AdmissionRequest{actor, user, {std::move(request)}}));
  admission_timer.Stop();
  return SubmitInternal(std::move(admission), "", 0, 0, std::nullopt);
}

absl::StatusOr<v1::Experiment> ExperimentManager::SubmitSweepPoint(
    v1::ExperimentRequest request, const std::string& sweep_id, int point,
    int max_concurrent_gpus, const std::string& rerun_of) {
  // A later attempt of a point already admitted with its sweep: as an admin, so that it is
  // validated and takes its place but meets no rate limit or quota a second time.
  const std::string user = request.user();
  const Actor actor{user, absl::StrCat("sweep ", sweep_id, " (a point run again)"),
                    /*admin=*/true};
  ASSIGN_OR_RETURN(Admission admission,
                   admission_.Admit(AdmissionRequest{actor, user, {std::move(request)}}));
  std::optional<int64_t> submit_order;
  if (!rerun_of.empty()) {
    absl::MutexLock lock(&mutex_);
    if (const auto kept = rerun_orders_.find(rerun_of); kept != rerun_orders_.end()) {
      submit_order = kept->second;
      rerun_orders_.erase(kept);
    }
  }
  return SubmitInternal(std::move(admission), sweep_id, point, max_concurrent_gpus, submit_order);
}

void ExperimentManager::RecoveredRerunsQueued() {
  absl::MutexLock lock(&mutex_);
  rerun_orders_.clear();
  scheduler_->HoldDispatchUntil(absl::InfinitePast());
  wake_.Signal();
}

absl::StatusOr<std::vector<v1::Experiment>> ExperimentManager::SubmitSweepPoints(
    Admission admission, const std::string& sweep_id, int max_concurrent_gpus) {
  std::vector<std::pair<v1::Experiment, v1::ExperimentEvent>> created;
  const google::protobuf::Timestamp now = TimestampNow();
  std::vector<v1::ExperimentRequest>& requests = admission.requests();
  for (size_t point = 0; point < requests.size(); ++point) {
    created.push_back(NewExperiment(admission, std::move(requests[point]), sweep_id,
                                    static_cast<int>(point), max_concurrent_gpus, now));
  }
  {
    absl::MutexLock lock(&mutex_);
    if (stopping_) return absl::UnavailableError("gpuprofd is shutting down");
  }
  // Stored without the manager's lock, as Submit does (the store's group commit); the
  // admission holds the points' queue places meanwhile.
  absl::StatusOr<std::vector<std::string>> stored = store_->CreateMany(created);
  if (!stored.ok()) {
    // Nothing was acknowledged (the points are stored all together or not at all); the
    // admission gives its places back.
    return NotStoredError(stored.status(),
                          "the sweep's points could not be stored, so none was queued");
  }
  const std::vector<std::string> ids = *std::move(stored);
  std::vector<v1::Experiment> experiments;
  // The places become queued experiments in one critical section: the quota never sees them
  // twice or not at all.
  admission_.Settle(admission, [&] {
    absl::MutexLock lock(&mutex_);
    for (size_t point = 0; point < created.size(); ++point) {
      v1::Experiment& experiment = created[point].first;
      experiment.set_id(ids[point]);
      // Stored, so acknowledged: if gpuprofd is stopping, they run after the restart.
      if (!stopping_) {
        scheduler_->Enqueue(PendingExperiment{
            ids[point], experiment.user(), experiment.request().priority(), next_submit_order_++,
            experiment.request().gpus(), workloads::RequiredGpuCount(experiment.request()),
            sweep_id, max_concurrent_gpus});
        active_[ids[point]].experiment = experiment;
      }
      experiments.push_back(std::move(experiment));
    }
    for (v1::Experiment& experiment : experiments) {
      experiment.set_queue_position(stopping_ ? 0 : scheduler_->QueuePosition(experiment.id()));
    }
    wake_.Signal();
  });
  return experiments;
}

void ExperimentManager::SetSweepPointListener(SweepPointListener listener) {
  absl::MutexLock lock(&mutex_);
  sweep_point_listener_ = std::move(listener);
}

absl::StatusOr<v1::Experiment> ExperimentManager::SubmitInternal(
    Admission admission, const std::string& sweep_id, int point, int max_concurrent_gpus,
    std::optional<int64_t> submit_order) {
  const Actor& actor = admission.actor();
  const std::string& user = admission.user();
  const bool on_behalf = admission.on_behalf();
  std::pair<v1::Experiment, v1::ExperimentEvent> created_pair =
      NewExperiment(admission, std::move(admission.requests().front()), sweep_id, point,
                    max_concurrent_gpus, TimestampNow());
  v1::Experiment& experiment = created_pair.first;
  v1::ExperimentEvent& first = created_pair.second;
  {
    PhaseTimer position_timer(SubmitPhase::kQueuePosition);
    absl::MutexLock lock(&mutex_);
    if (stopping_) return absl::UnavailableError("gpuprofd is shutting down");
    // Position among what is queued now, plus this one; recomputed live by Get.
    first.mutable_state()->set_queue_position(static_cast<int>(scheduler_->queued_count()) + 1);
  }
  experiment.set_queue_position(first.state().queue_position());
  v1::AuditEntry audit;
  *audit.mutable_time() = experiment.created();
  audit.set_actor(actor.user);
  if (on_behalf) audit.set_on_behalf_of(user);
  audit.set_action("submit");
  audit.set_detail(absl::StrCat(
      on_behalf ? absl::StrCat("admin ", actor.user, " on behalf of ", user, ": ") : "",
      v1::Workload_Name(experiment.workload()),
      CustomKernelAuditDetail({experiment.request()})));
  audit.set_authenticated_by(actor.authenticated_by);
  // Stored without the manager's lock, so that concurrent submissions share one commit (the
  // store's group commit) instead of each waiting for the previous one's fsync; the audit
  // entry goes into the same transaction, so a submit costs one commit, not two.
  PhaseTimer store_timer(SubmitPhase::kStore);
  absl::StatusOr<std::string> created = store_->Create(experiment, first, &audit);
  store_timer.Stop();
  if (!created.ok()) {
    // Nothing was acknowledged: the client sees the refusal and can submit again (the
    // admission gives its place and token back).
    return NotStoredError(created.status(),
                          "the experiment could not be stored, so it was not queued");
  }
  const std::string id = *std::move(created);
  experiment.set_id(id);
  PhaseTimer enqueue_timer(SubmitPhase::kEnqueue);
  // Its place becomes a queued experiment in one critical section.
  admission_.Settle(admission, [&] {
    absl::MutexLock lock(&mutex_);
    // Stored, so acknowledged: if gpuprofd is stopping, it runs after the restart.
    if (stopping_) return;
    // First come, first served in the order the commits were acknowledged.
    PendingExperiment pending{id,
                              experiment.user(),
                              experiment.request().priority(),
                              submit_order.has_value() ? *submit_order : next_submit_order_++,
                              experiment.request().gpus(),
                              workloads::RequiredGpuCount(experiment.request()),
                              sweep_id,
                              max_concurrent_gpus};
    scheduler_->Enqueue(std::move(pending));
    experiment.set_queue_position(scheduler_->QueuePosition(id));
    active_[id].experiment = experiment;
    wake_.Signal();
  });
  return experiment;
}

absl::StatusOr<int64_t> ExperimentManager::Subscribe(const std::string& id, int64_t from_seq,
                                                     std::shared_ptr<EventSink> sink,
                                                     const Watcher& watcher) {
  return SubscribeFromSeq(*this, id, from_seq, sink, watcher);
}

absl::StatusOr<CatchUp> ExperimentManager::CatchUpStream(const std::string& id, int64_t from_seq,
                                                         const std::shared_ptr<EventSink>& sink,
                                                         const Watcher& watcher,
                                                         int64_t& handle) {
  // Replay and registration happen under one lock, and events are appended under it too, so
  // the stream has neither gaps nor duplicates.
  absl::MutexLock lock(&mutex_);
  // A cancel storing the final event without the lock: replay after it, not beside it.
  WaitForFinalWriteLocked(id);
  const auto active = active_.find(id);
  const bool live = active != active_.end() && !stopping_;
  auto replay = [&](int64_t from,
                    int64_t max_events) -> absl::StatusOr<std::vector<v1::ExperimentEvent>> {
    ASSIGN_OR_RETURN(std::vector<v1::ExperimentEvent> events,
                     store_->Events(id, from, {.max_events = max_events}));
    if (static_cast<int64_t>(events.size()) >= max_events) return events;
    // Events still waiting for the disk come after the stored ones.
    int64_t replayed_seq = events.empty() ? from - 1 : events.back().seq();
    for (const auto& [experiment, event] : unpersisted_) {
      if (experiment.id() == id && event.seq() > replayed_seq) {
        events.push_back(event);
        replayed_seq = event.seq();
      }
    }
    return events;
  };
  return fan_out_.CatchUpTo(id, live ? active->second.experiment.user() : "",
                            live ? &active->second.sinks : nullptr, from_seq, replay, sink,
                            watcher, handle);
}

absl::StatusOr<std::vector<v1::ExperimentEvent>> ExperimentManager::EventPage(
    const std::string& id, int64_t from_seq, store::EventPageLimit limit) {
  return store_->Events(id, from_seq, limit);
}

void ExperimentManager::CountWatchRefusal(const absl::Status& refusal) {
  if (observer_ != nullptr) observer_->Refused(WatchSlots::RefusalReason(refusal));
}

void ExperimentManager::Unsubscribe(const std::string& id, int64_t subscription) {
  absl::MutexLock lock(&mutex_);
  const auto active = active_.find(id);
  fan_out_.Unsubscribe(active != active_.end() ? &active->second.sinks : nullptr, subscription);
}

absl::StatusOr<v1::Experiment> ExperimentManager::Cancel(const std::string& id,
                                                         const std::string& reason,
                                                         const Actor& actor) {
  absl::MutexLock lock(&mutex_);
  WaitForFinalWriteLocked(id);
  const auto it = active_.find(id);
  if (it == active_.end()) {
    ASSIGN_OR_RETURN(v1::Experiment experiment, GetLocked(id));
    return absl::FailedPreconditionError(absl::StrCat(
        "experiment ", id, " already ended: ", v1::ExperimentState_Name(experiment.state())));
  }
  Active& active = it->second;
  const std::string owner = active.experiment.user();
  if (!actor.admin && owner != actor.user) {
    const absl::Status denied = absl::PermissionDeniedError(absl::StrCat(
        "experiment ", id, " belongs to ", owner, "; only its owner or an admin may cancel it "
        "(you are ", actor.user, ", ", actor.authenticated_by, ")"));
    return admission_.Refuse(actor, owner, "not-owner", denied);
  }
  RETURN_IF_ERROR(CheckPrintableText("reason", reason));
  const std::string why = reason.empty() ? absl::StrCat("cancelled by ", actor.user) : reason;
  v1::AuditEntry entry;
  entry.set_actor(actor.user);
  if (owner != actor.user) entry.set_on_behalf_of(owner);
  entry.set_action("cancel");
  entry.set_experiment_id(id);
  entry.set_detail(why);
  entry.set_authenticated_by(actor.authenticated_by);
  if (active.experiment.state() == v1::QUEUED && unpersisted_.empty()) {
    return CancelQueuedLocked(id, why, std::move(entry));
  }
  if (active.experiment.state() == v1::QUEUED) {
    scheduler_->Remove(id);
  } else {
    // The lease stays until the workers are gone (OnWorkerExit releases it).
    workers_.Kill(active.experiment.id());
  }
  // Who cancelled is in the audit trail; the reason stays the caller's own words.
  EndLocked(id, v1::CANCELLED, why, "");
  RecordAudit(std::move(entry));
  return GetLocked(id);
}

absl::StatusOr<v1::Experiment> ExperimentManager::CancelQueuedLocked(const std::string& id,
                                                                     const std::string& why,
                                                                     v1::AuditEntry audit) {
  Active& active = active_.at(id);
  scheduler_->Remove(id);
  // Nothing else appends to a queued experiment that is out of the queue, Subscribe and Cancel
  // wait for this flag, and Shutdown leaves queued experiments alone, so the lock can be let
  // go while the final event is committed.
  active.final_write_in_flight = true;
  v1::ExperimentEvent event = StateEvent(v1::CANCELLED, why);
  event.set_experiment_id(id);
  event.set_seq(active.experiment.last_seq() + 1);
  *event.mutable_time() = TimestampNow();
  v1::Experiment ended = active.experiment;
  ApplyEvent(event, ended);
  *audit.mutable_time() = event.time();

  // The cancel and its audit entry in one commit of the store's group commit, without the
  // manager's lock: concurrent cancels and submits share the fsync instead of queueing on the
  // lock for one each.
  mutex_.Unlock();
  const absl::Status stored = store_->Update(ended, event, &audit);
  mutex_.Lock();

  Active& still_active = active_.at(id);
  if (!stored.ok()) {
    // As for any event the disk refuses: kept in memory, retried, nothing starts meanwhile.
    Log(absl::StrCat("could not store event ", event.seq(), " of ", id, ": ",
                         stored.ToString(), "; retrying every second, and starting nothing "
                         "until it is stored"));
    storage_error_ = std::string(stored.message());
    unpersisted_.emplace_back(ended, event);
    RecordAudit(audit);
  }
  // Metrics first: whoever sees the final event must also find it counted.
  if (observer_ != nullptr) observer_->ExperimentEnded(ended);
  still_active.experiment = ended;
  PublishEventLocked(still_active, event);
  EventFanOut<v1::ExperimentEvent>::EndAll(still_active.sinks);
  active_.erase(id);
  final_write_done_.SignalAll();
  return ended;
}

void ExperimentManager::WaitForFinalWriteLocked(const std::string& id) {
  while (true) {
    const auto it = active_.find(id);
    if (it == active_.end() || (!it->second.final_write_in_flight && !it->second.starting)) {
      return;
    }
    final_write_done_.Wait(&mutex_);
  }
}

absl::StatusOr<v1::Experiment> ExperimentManager::GetLocked(const std::string& id) {
  for (auto it = unpersisted_.rbegin(); it != unpersisted_.rend(); ++it) {
    if (it->first.id() == id) return it->first;
  }
  return store_->Get(id);
}

void ExperimentManager::RetryUnpersistedLocked() {
  if (unpersisted_.empty()) return;
  const absl::Status stored = store_->UpdateMany(unpersisted_);
  if (!stored.ok()) return;
  Log(absl::StrCat("the database can be written again: ", unpersisted_.size(),
                       " delayed write(s) stored; starting experiments again"));
  unpersisted_.clear();
  storage_error_.clear();
}

std::map<std::string, UserUse> ExperimentManager::UseByUser() {
  std::map<std::string, UserUse> use;
  absl::MutexLock lock(&mutex_);
  for (const auto& [id, active] : active_) {
    if (active.experiment.state() == v1::QUEUED) {
      ++use[active.experiment.user()].queued;
    } else if (active.experiment.state() == v1::RUNNING) {
      use[active.experiment.user()].running_gpus += active.experiment.gpu_ids_size();
    }
  }
  return use;
}

absl::StatusOr<std::vector<v1::AuditEntry>> ExperimentManager::Audit(
    const v1::ListAuditRequest& request) {
  return store_->ListAudit(request.user(), request.experiment_id(), request.limit());
}

void ExperimentManager::RecordAudit(v1::AuditEntry entry) {
  admission_.RecordAudit(std::move(entry));
}

absl::StatusOr<v1::Experiment> ExperimentManager::Get(const std::string& id) {
  absl::MutexLock lock(&mutex_);
  ASSIGN_OR_RETURN(v1::Experiment experiment, GetLocked(id));
  experiment.set_queue_position(
      experiment.state() == v1::QUEUED ? scheduler_->QueuePosition(id) : 0);
  return experiment;
}

absl::StatusOr<ExperimentPage> ExperimentManager::List(const ExperimentFilter& filter,
                                                       int page_size,
                                                       const std::string& page_token) {
  return store_->List(filter, page_size, page_token);
}

v1::ListGpusResponse ExperimentManager::ListGpus() {
  v1::ListGpusResponse response = inventory_;
  absl::MutexLock lock(&mutex_);
  response.mutable_host()->set_jit_cache_entries(jit_cache_entries_);
  response.mutable_host()->set_jit_cache_bytes(jit_cache_bytes_);
  for (v1::GpuInfo& gpu : *response.mutable_gpus()) gpu_health_.Fill(gpu);
  for (const auto& [gpu, id] : scheduler_->GpuLeases()) {
    if (gpu < 0 || gpu >= response.gpus_size()) continue;
    response.mutable_gpus(gpu)->set_leased_to_experiment(id);
    const auto active = active_.find(id);
    if (active != active_.end()) {
      response.mutable_gpus(gpu)->set_leased_to_user(active->second.experiment.user());
    }
  }
  return response;
}

int64_t ExperimentManager::queued_count() {
  absl::MutexLock lock(&mutex_);
  return static_cast<int64_t>(scheduler_->queued_count());
}

std::map<int, std::string> ExperimentManager::GpuLeases() {
  absl::MutexLock lock(&mutex_);
  return scheduler_->GpuLeases();
}

absl::StatusOr<int64_t> ExperimentManager::StoreSizeBytes() { return store_->SizeBytes(); }

std::vector<store::DamagedRow> ExperimentManager::DamagedStoreRows() {
  return store_->DamagedRowsMet();
}

void ExperimentManager::AppendEventLocked(Active& active, v1::ExperimentEvent event) {
  v1::Experiment& experiment = active.experiment;
  event.set_experiment_id(experiment.id());
  event.set_seq(experiment.last_seq() + 1);
  if (!event.has_time()) *event.mutable_time() = TimestampNow();
  ApplyEvent(event, experiment);
  if (unpersisted_.empty()) {
    const absl::Status stored = store_->Update(experiment, event);
    if (!stored.ok()) {
      Log(absl::StrCat("could not store event ", event.seq(), " of ", experiment.id(), ": ",
                           stored.ToString(), "; retrying every second, and starting nothing "
                           "until it is stored"));
      storage_error_ = std::string(stored.message());
      unpersisted_.emplace_back(experiment, event);
    }
  } else {
    unpersisted_.emplace_back(experiment, event);
  }
  // A run whose events cannot be kept is stopped (by the control loop, outside this caller)
  // rather than left to pile up events in memory.
  if (!unpersisted_.empty() && !IsTerminalState(experiment.state())) {
    active.storage_failed = true;
    wake_.Signal();
  }
  PublishEventLocked(active, event);
}

void ExperimentManager::PublishEventLocked(Active& active, const v1::ExperimentEvent& event) {
  EventFanOut<v1::ExperimentEvent>::Publish(active.sinks, event);
  if (event.has_state() && !active.experiment.sweep_id().empty() && sweep_point_listener_) {
    sweep_point_listener_(active.experiment);
  }
}

void ExperimentManager::EndLocked(const std::string& id, v1::ExperimentState state,
                                  const std::string& reason, const std::string& stderr_tail,
                                  const GpuFault* fault) {
  const auto it = active_.find(id);
  if (it == active_.end()) return;
  v1::ExperimentEvent event = StateEvent(state, reason);
  event.mutable_state()->set_worker_stderr_tail(stderr_tail);
  if (fault != nullptr) {
    event.mutable_state()->set_fault_gpu(fault->gpu);
    event.mutable_state()->set_fault_xid(fault->xid);
    event.mutable_state()->set_fault_class(fault->fault_class);
  }
  event.mutable_state()->mutable_gpu_ids()->CopyFrom(it->second.experiment.gpu_ids());
  *event.mutable_time() = TimestampNow();
  // Metrics first: whoever sees the final event must also find it counted.
  if (observer_ != nullptr) {
    v1::Experiment ended = it->second.experiment;
    ApplyEvent(event, ended);
    observer_->ExperimentEnded(ended);
  }
  AppendEventLocked(it->second, std::move(event));
  EventFanOut<v1::ExperimentEvent>::EndAll(it->second.sinks);
  active_.erase(it);
}

void ExperimentManager::StartLocked(const Dispatch& dispatch) {
  const auto it = active_.find(dispatch.id);
  if (it == active_.end()) {
    scheduler_->Release(dispatch.id);
    return;
  }
  Active& active = it->second;
  const workloads::WorkloadSpec* spec =
      workloads::FindWorkloadSpec(active.experiment.request().workload_case());
  const bool one_per_rank = spec != nullptr && spec->supports_tensor_parallelism &&
                            active.experiment.request().tp_degree() > 1;
  // A custom kernel is the submitter's code: a new worker, retired when it ends. A capture's
  // worker has run a profiler's child: retired too.
  const WorkerReuse reuse = active.experiment.request().has_custom_kernel() ||
                                    active.experiment.request().has_capture()
                                ? WorkerReuse::kSingleUse
                                : WorkerReuse::kWarm;
  PendingStart start{.id = dispatch.id,
                     .group = workers_.Reserve(dispatch.id, dispatch.gpus, one_per_rank, reuse)};
  start.running = StateEvent(v1::RUNNING);
  for (int gpu : dispatch.gpus) start.running.mutable_state()->add_gpu_ids(gpu);
  start.running.set_experiment_id(dispatch.id);
  start.running.set_seq(active.experiment.last_seq() + 1);
  *start.running.mutable_time() = TimestampNow();
  start.experiment = active.experiment;
  ApplyEvent(start.running, start.experiment);
  // Out of the queue, not yet running: Subscribe and Cancel wait for it (as for a final write
  // in flight), worker reports and exits are held back, Shutdown leaves it to
  // StartReservedLocked, and a preemption's kill waits for its workers' Install.
  active.starting = true;
  pending_starts_.push_back(std::move(start));
}

void ExperimentManager::StartReservedLocked() {
  if (pending_starts_.empty()) return;
  std::vector<PendingStart> starts = std::exchange(pending_starts_, {});

  // The worker starts and the commits without the lock: every RPC used to wait behind a vfork,
  // an exec and an fsync for each dispatch. The control thread still starts the processes (a
  // worker dies with the thread that forked it, PR_SET_PDEATHSIG).
  mutex_.Unlock();
  for (PendingStart& start : starts) {
    start.processes = workers_.StartReserved(start.group);
    const bool all_started =
        std::all_of(start.processes.begin(), start.processes.end(),
                    [](const absl::StatusOr<std::unique_ptr<WorkerProcess>>& process) {
                      return process.ok();
                    });
    if (options_.while_starting_for_test) options_.while_starting_for_test(start.id);
    // A start that failed ends the experiment FAILED, with no RUNNING before it.
    if (all_started) start.stored = store_->Update(start.experiment, start.running);
  }
  mutex_.Lock();

  for (PendingStart& start : starts) {
    Active& active = active_.at(start.id);
    active.starting = false;
    const absl::Status installed = workers_.Install(start.group, std::move(start.processes));
    if (!installed.ok()) {
      scheduler_->Release(start.id);
      EndLocked(start.id, v1::FAILED,
                absl::StrCat("could not start a worker: ", installed.message()), "");
      continue;
    }
    // As AppendEventLocked would have: a RUNNING the disk refused is kept and retried, and the
    // control loop stops the run.
    if (!start.stored.ok()) {
      Log(absl::StrCat("could not store event ", start.running.seq(), " of ", start.id, ": ",
                       start.stored.ToString(), "; retrying every second, and starting nothing "
                       "until it is stored"));
      storage_error_ = std::string(start.stored.message());
      unpersisted_.emplace_back(start.experiment, start.running);
    }
    active.experiment = std::move(start.experiment);
    if (!unpersisted_.empty()) {
      active.storage_failed = true;
      wake_.Signal();
    }
    active.workers = start.group.workers;
    active.ranks_finished = 0;
    const auto& timeout = active.experiment.request().timeout();
    active.deadline = absl::Now() + absl::Nanoseconds(TimeUtil::DurationToNanoseconds(timeout));
    PublishEventLocked(active, start.running);
    if (observer_ != nullptr) observer_->ExperimentStarted(active.experiment);

    if (stopping_) {
      // Shutdown ran meanwhile and left this one to us: it did start, so it is interrupted.
      workers_.Kill(start.id);
      EndLocked(start.id, v1::INTERRUPTED, "gpuprofd shut down while the experiment ran", "");
      continue;
    }
    if (active.preempting) {
      // Chosen for a preemption while starting (its workers were killed at Install): queued
      // again once they are gone, as for any preempted run.
      if (!workers_.AnyRunning(start.id)) RequeuePreemptedLocked(active);
      wake_.Signal();
      continue;
    }
    if (!active.exited_while_starting.empty()) {
      // A worker died before it was given the experiment (its exit was held back till now).
      if (observer_ != nullptr) observer_->WorkerFailed(/*timed_out=*/false);
      workers_.Kill(start.id);
      EndLocked(start.id, v1::FAILED,
                absl::StrCat(active.exited_while_starting, " while starting the experiment"),
                active.exited_while_starting_tail);
      ReleaseIfNoWorkerLocked(start.id);
      continue;
    }
    if (active.workers.size() > 1 && !start.group.reused) {
      // A new group: rank 0's worker makes the NCCL rendezvous; its report carries on in
      // OnWorkerReport.
      workers_.StartRendezvous(start.group);
      continue;
    }
    workers_.AssignRanks(active.experiment, active.workers, "", start.group.reused);
  }
  final_write_done_.SignalAll();
}

void ExperimentManager::PreemptLocked() {
  if (options_.access == nullptr) return;
  const v1::PreemptionPolicy& policy = options_.access->policy()->preemption();
  PreemptionRules rules;
  rules.min_priority = policy.min_preempting_priority();
  rules.grace = absl::Seconds(policy.grace_period().seconds()) +
                absl::Nanoseconds(policy.grace_period().nanos());
  const Preemption preemption = scheduler_->ChoosePreemption(absl::Now(), rules);
  for (const std::string& victim : preemption.victims) {
    const auto it = active_.find(victim);
    if (it == active_.end()) continue;
    Active& active = it->second;
    active.preempting = true;
    active.preempted_reason =
        absl::StrCat("preempted by ", preemption.for_id, " (priority ", preemption.for_priority,
                     ") after it waited ", absl::FormatDuration(rules.grace),
                     " for GPUs; queued again in its original place, to run from the start");
    workers_.Kill(active.experiment.id());
    if (observer_ != nullptr) observer_->Preempted();
    const auto for_experiment = active_.find(preemption.for_id);
    v1::AuditEntry entry;
    entry.set_actor(for_experiment == active_.end() ? "" : for_experiment->second.experiment.user());
    entry.set_on_behalf_of(active.experiment.user());
    entry.set_action("preempt");
    entry.set_experiment_id(victim);
    entry.set_detail(active.preempted_reason);
    entry.set_authenticated_by("scheduler");
    RecordAudit(std::move(entry));
    Log(absl::StrCat(victim, " ", active.preempted_reason));
  }
}

void ExperimentManager::RequeuePreemptedLocked(Active& active) {
  const std::string id = active.experiment.id();
  v1::ExperimentEvent preempted = StateEvent(v1::PREEMPTED, active.preempted_reason);
  preempted.mutable_state()->mutable_gpu_ids()->CopyFrom(active.experiment.gpu_ids());
  AppendEventLocked(active, std::move(preempted));
  scheduler_->Preempt(id);
  active.preempting = false;
  active.preempted_reason.clear();
  active.workers.clear();
  active.ranks_finished = 0;
  active.deadline = absl::InfiniteFuture();
  active.experiment.clear_started();
  active.experiment.clear_gpu_ids();
  v1::ExperimentEvent queued = StateEvent(v1::QUEUED);
  queued.mutable_state()->set_queue_position(scheduler_->QueuePosition(id));
  AppendEventLocked(active, std::move(queued));
}

void ExperimentManager::ReleaseIfNoWorkerLocked(const std::string& id) {
  if (workers_.AnyRunning(id)) return;
  scheduler_->Release(id);
  wake_.Signal();
}

void ExperimentManager::OnWorkerReport(int64_t worker,
                                       const worker_protocol::WorkerReport& report) {
  absl::MutexLock lock(&mutex_);
  const std::optional<WorkerRun> run = workers_.Running(worker);
  if (!run.has_value()) return;
  const std::string id = run->experiment_id;
  const int rank = run->rank;
  const auto found = active_.find(id);
  // Cancelled (or timing out): what the dying worker still says no longer counts.
  // Starting: nothing it says before it is given the experiment (its Ready) matters.
  if (found == active_.end() || found->second.ending || found->second.storage_failed ||
      found->second.preempting || found->second.starting) {
    return;
  }
  Active& active = found->second;
  workers_.NoteReport(worker);
  ++active.reports;
  active.report_bytes += static_cast<int64_t>(report.ByteSizeLong());
  if (active.reports > options_.max_reports_per_experiment ||
      active.report_bytes > options_.max_report_bytes_per_experiment) {
    if (observer_ != nullptr) observer_->WorkerFailed(/*timed_out=*/false);
    workers_.Kill(active.experiment.id());
    EndLocked(id, v1::FAILED,
              absl::StrCat("rank ", rank, "'s worker flooded its report pipe (", active.reports,
                           " reports, ", active.report_bytes,
                           " bytes; the limits per experiment are ",
                           options_.max_reports_per_experiment, " reports and ",
                           options_.max_report_bytes_per_experiment,
                           " bytes) and was killed"),
              workers_.StderrTail(worker));
    return;
  }
  if (report.has_rendezvous()) {
    if (!report.rendezvous().error().empty()) {
      workers_.Kill(active.experiment.id());
      EndLocked(id, v1::FAILED,
                absl::StrCat("rank 0 could not create the NCCL rendezvous: ",
                             report.rendezvous().error()),
                workers_.StderrTail(worker));
      return;
    }
    workers_.AssignRanks(active.experiment, active.workers, report.rendezvous().nccl_unique_id(),
                         /*reused=*/false);
    return;
  }
  if (report.has_event()) {
    v1::ExperimentEvent event = report.event();
    if (event.has_state()) return;  // states are the daemon's to decide
    // Every rank measures; rank 0's result speaks for the group (the ranks agree on it over
    // NCCL), the others' would repeat it.
    if (event.has_result() && rank != 0) return;
    event.set_rank(rank);
    AppendEventLocked(active, std::move(event));
    return;
  }
  if (!report.has_finished()) return;
  const auto& finished = report.finished();
  if (finished.jit_cache_entries() > 0) {
    jit_cache_entries_ = finished.jit_cache_entries();
    jit_cache_bytes_ = finished.jit_cache_bytes();
  }
  // Read before Finished, which retires a single-use worker (a custom kernel's).
  const std::string stderr_tail = finished.ok() ? "" : workers_.StderrTail(worker);
  workers_.Finished(worker);
  const bool group = active.workers.size() > 1;
  if (finished.ok()) {
    if (++active.ranks_finished == static_cast<int>(active.workers.size())) {
      EndLocked(id, v1::FINISHED, "", "");
    }
  } else {
    // One rank failing ends the group: the others may be waiting on it inside NCCL.
    workers_.Kill(active.experiment.id());
    EndLocked(id, v1::FAILED,
              group ? absl::StrCat("rank ", rank, ": ", finished.error()) : finished.error(),
              stderr_tail);
  }
  // A worker that saw an error may hold a broken CUDA context or communicator: never reuse it.
  if (!finished.ok() || finished.must_not_reuse()) workers_.Retire(worker);
  ReleaseIfNoWorkerLocked(id);
  wake_.Signal();
}

void ExperimentManager::OnWorkerExit(int64_t worker, const WorkerExit& exit) {
  absl::MutexLock lock(&mutex_);
  // The process is gone; its object is destroyed on the control thread.
  const std::optional<WorkerRun> run = workers_.Exited(worker);
  if (!run.has_value()) return;  // retired on purpose
  const std::string id = run->experiment_id;
  const int rank = run->rank;
  if (!id.empty()) {
    const auto active = active_.find(id);
    if (active != active_.end() && active->second.starting) {
      // Its RUNNING is being committed without the lock: the start fails it once published,
      // so that FAILED comes after RUNNING.
      if (active->second.exited_while_starting.empty()) {
        active->second.exited_while_starting =
            absl::StrCat(rank > 0 ? absl::StrCat("rank ", rank, "'s worker process")
                                  : std::string("the worker process"),
                         " ", exit.description);
        active->second.exited_while_starting_tail = exit.stderr_tail;
      }
      return;
    }
    if (active != active_.end() && active->second.preempting) {
      // Preempted: queued again once its last worker is gone, keeping the lease till then.
      if (!workers_.AnyRunning(id)) RequeuePreemptedLocked(active->second);
      wake_.Signal();
      return;
    }
    if (active != active_.end()) {
      const bool group = active->second.workers.size() > 1;
      const std::string who = group ? absl::StrCat("rank ", rank, "'s worker process")
                                    : std::string("the worker process");
      if (observer_ != nullptr) observer_->WorkerFailed(/*timed_out=*/active->second.ending);
      workers_.Kill(active->second.experiment.id());
      if (active->second.ending) {
        EndLocked(id, v1::TIMED_OUT,
                  absl::StrCat("ran longer than its timeout of ",
                               absl::FormatDuration(absl::Nanoseconds(TimeUtil::DurationToNanoseconds(
                                   active->second.experiment.request().timeout()))),
                               "; ", group ? "every rank's worker was" : "the worker was",
                               " killed", active->second.ranks_at_deadline),
                  exit.stderr_tail);
      } else {
        EndLocked(id, v1::FAILED,
                  absl::StrCat(who, " ", exit.description, " while running the experiment"),
                  exit.stderr_tail);
      }
    }
    ReleaseIfNoWorkerLocked(id);
  }
  wake_.Signal();
}

void ExperimentManager::ControlLoop() {
  absl::MutexLock lock(&mutex_);
  while (!stopping_) {
    RetryUnpersistedLocked();
    std::vector<std::string> unstorable;
    for (const auto& [id, active] : active_) {
      if (active.storage_failed) unstorable.push_back(id);
    }
    for (const std::string& id : unstorable) {
      Active& active = active_.at(id);
      if (active.experiment.state() == v1::QUEUED) scheduler_->Remove(id);
      workers_.Kill(active.experiment.id());
      EndLocked(id, v1::FAILED,
                absl::StrCat("gpuprofd could not store this experiment's events (",
                             storage_error_, "), so it stopped the run rather than lose them"),
                "");
    }
    // While writes wait for the disk, or the disk refuses them, nothing new starts (its events
    // could not be kept), and nothing is preempted for it.
    if (unpersisted_.empty() && !store_->disk_full()) {
      for (const Dispatch& dispatch : scheduler_->DispatchReady(absl::Now())) {
        StartLocked(dispatch);
      }
      PreemptLocked();
    }
    StartReservedLocked();

    const absl::Time now = absl::Now();
    absl::Time next_wake = now + absl::Seconds(1);
    for (auto& [id, active] : active_) {
      if (active.workers.empty() || active.ending || active.preempting) continue;
      if (active.deadline <= now) {
        active.ending = true;
        active.ranks_at_deadline = workers_.DescribeRanks(id, active.workers, now);
        workers_.Kill(active.experiment.id());
      } else {
        next_wake = std::min(next_wake, active.deadline);
      }
    }
    next_wake = std::min(next_wake, workers_.RetireIdle(now));

    if (auto retired = workers_.TakeRetired(); !retired.empty()) {
      mutex_.Unlock();
      retired.clear();  // joins their reader threads, which may need the lock
      mutex_.Lock();
      continue;
    }
    wake_.WaitWithDeadline(&mutex_, next_wake);
  }
}

void ExperimentManager::Shutdown() {
  {
    absl::MutexLock lock(&mutex_);
    if (stopping_) return;
    stopping_ = true;
    // Decide the running experiments' fate first: the workers die with the control thread
    // that forked them (PR_SET_PDEATHSIG follows the thread), and their exits must not be
    // mistaken for crashes.
    std::vector<std::string> running;
    for (const auto& [id, active] : active_) {
      if (active.experiment.state() == v1::RUNNING) running.push_back(id);
    }
    for (const auto& id : running) {
      EndLocked(id, v1::INTERRUPTED, "gpuprofd shut down while the experiment ran", "");
    }
    RetryUnpersistedLocked();
    if (!unpersisted_.empty()) {
      Log(absl::StrCat(unpersisted_.size(), " write(s) could not be stored before exit (",
                           storage_error_, "); the experiments they belong to will show as "
                           "interrupted after a restart"));
    }
    // Queued experiments stay queued in the store; their watchers reattach after restart.
    for (auto& [id, active] : active_) {
      EventFanOut<v1::ExperimentEvent>::EndAll(active.sinks);
      active.sinks.clear();
    }
    wake_.SignalAll();
  }
  if (control_thread_.joinable()) control_thread_.join();
  std::vector<std::unique_ptr<WorkerProcess>> retired;
  {
    absl::MutexLock lock(&mutex_);
    workers_.RetireAll();
    retired = workers_.TakeRetired();
  }
  retired.clear();
}

}  // namespace gpuprof::daemon
