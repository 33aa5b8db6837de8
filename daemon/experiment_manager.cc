#include "daemon/experiment_manager.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "common/experiment_states.h"
#include "common/status_macros.h"
#include "google/protobuf/util/time_util.h"
#include "workloads/spec_table.h"

namespace gpuprof::daemon {
namespace {

using ::google::protobuf::util::TimeUtil;
namespace worker_protocol = ::gpuprof::worker_protocol;


google::protobuf::Timestamp Now() {
  return TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(absl::Now()));
}

v1::ExperimentEvent StateEvent(v1::ExperimentState state, const std::string& reason = "") {
  v1::ExperimentEvent event;
  event.mutable_state()->set_state(state);
  event.mutable_state()->set_reason(reason);
  return event;
}

void LogLine(const std::string& line) { std::fprintf(stderr, "gpuprofd: %s\n", line.c_str()); }

// What an event changes in the experiment it belongs to.
void ApplyEvent(const v1::ExperimentEvent& event, v1::Experiment& experiment) {
  experiment.set_last_seq(event.seq());
  if (event.has_state()) {
    const auto& change = event.state();
    experiment.set_state(change.state());
    if (!change.reason().empty()) experiment.set_reason(change.reason());
    if (!change.worker_stderr_tail().empty()) {
      experiment.set_worker_stderr_tail(change.worker_stderr_tail());
    }
    if (change.state() == v1::RUNNING) {
      experiment.mutable_gpu_ids()->CopyFrom(change.gpu_ids());
      *experiment.mutable_started() = event.time();
      experiment.set_queue_position(0);
    }
    if (IsTerminalState(change.state())) *experiment.mutable_finished() = event.time();
  } else if (event.has_result()) {
    *experiment.mutable_result() = event.result();
  }
}

// What every worker runs with: CUDA ordinals in nvidia-smi's order, and NVLink multicast off
// for NCCL, PyTorch and NVSHMEM (multicast objects can take a shared host's GPUs out of
// service; no workload needs them).
std::vector<std::string> WorkerEnvironment() {
  return {"CUDA_DEVICE_ORDER=PCI_BUS_ID", "NCCL_NVLS_ENABLE=0",
          "TORCH_SYMM_MEM_DISABLE_MULTICAST=1", "NVSHMEM_DISABLE_NVLS=1"};
}

}  // namespace

ExperimentManager::ExperimentManager(ManagerOptions options,
                                     std::unique_ptr<ExperimentStore> store,
                                     ManagerObserver* observer)
    : options_(std::move(options)), store_(std::move(store)), observer_(observer) {}

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
  }
  RETURN_IF_ERROR(manager->Recover());
  manager->control_thread_ = std::thread([m = manager.get()] { m->ControlLoop(); });
  return manager;
}

ExperimentManager::~ExperimentManager() { Shutdown(); }

absl::Status ExperimentManager::Probe() {
  // The daemon never creates a CUDA context: a short-lived worker reports the inventory.
  struct ProbeState {
    absl::Mutex mutex;
    std::optional<v1::ListGpusResponse> inventory;
    std::optional<WorkerExit> exit;
    absl::Notification done;
  };
  auto state = std::make_shared<ProbeState>();
  WorkerLaunch launch{options_.worker_binary, {}, WorkerEnvironment()};
  auto process = WorkerProcess::Start(
      launch,
      [state](const worker_protocol::WorkerReport& report) {
        if (!report.has_probe()) return;
        absl::MutexLock lock(&state->mutex);
        state->inventory = report.probe();
        if (!state->done.HasBeenNotified()) state->done.Notify();
      },
      [state](const WorkerExit& exit) {
        absl::MutexLock lock(&state->mutex);
        state->exit = exit;
        if (!state->done.HasBeenNotified()) state->done.Notify();
      });
  if (!process.ok()) return process.status();
  worker_protocol::WorkerCommand command;
  command.mutable_probe()->set_measure_copy_bandwidth(options_.measure_copy_bandwidth);
  (void)(*process)->Send(command);
  const bool answered = state->done.WaitForNotificationWithTimeout(options_.probe_timeout);
  worker_protocol::WorkerCommand shutdown;
  shutdown.mutable_shutdown();
  (void)(*process)->Send(shutdown);
  absl::MutexLock lock(&state->mutex);
  if (state->inventory.has_value()) {
    inventory_ = *state->inventory;
  } else {
    // Serve anyway: the daemon stays useful for listing and the CPU workloads the error allows.
    inventory_.Clear();
    inventory_.set_probe_error(
        answered ? absl::StrCat("the probe worker ", state->exit->description, ": ",
                                state->exit->stderr_tail)
                 : absl::StrCat("the probe worker did not answer within ",
                                absl::FormatDuration(options_.probe_timeout)));
  }
  inventory_.mutable_host()->set_gpuprof_version(options_.version);
  {
    absl::MutexLock lock(&mutex_);
    jit_cache_entries_ = inventory_.host().jit_cache_entries();
    jit_cache_bytes_ = inventory_.host().jit_cache_bytes();
  }
  LogLine(absl::StrCat("inventory: ", inventory_.gpus_size(), " GPU(s)",
                       inventory_.probe_error().empty() ? ""
                                                        : " (" + inventory_.probe_error() + ")",
                       "; workloads: ", absl::StrJoin(inventory_.supported_workloads(), ", ")));
  return absl::OkStatus();
}

absl::Status ExperimentManager::Recover() {
  ASSIGN_OR_RETURN(auto running, store_->ListByState(v1::RUNNING));
  std::vector<std::pair<v1::Experiment, v1::ExperimentEvent>> interrupted;
  for (auto& experiment : running) {
    v1::ExperimentEvent event =
        StateEvent(v1::INTERRUPTED, "gpuprofd stopped while the experiment ran");
    event.set_experiment_id(experiment.id());
    event.set_seq(experiment.last_seq() + 1);
    *event.mutable_time() = Now();
    experiment.set_state(v1::INTERRUPTED);
    experiment.set_reason(event.state().reason());
    experiment.set_last_seq(event.seq());
    *experiment.mutable_finished() = event.time();
    interrupted.emplace_back(std::move(experiment), std::move(event));
  }
  if (!interrupted.empty()) {
    RETURN_IF_ERROR(store_->UpdateMany(interrupted));
    if (observer_ != nullptr) {
      for (const auto& [experiment, event] : interrupted) observer_->ExperimentEnded(experiment);
    }
    LogLine(absl::StrCat(interrupted.size(), " experiment(s) were running when gpuprofd "
                         "stopped; marked INTERRUPTED"));
  }
  ASSIGN_OR_RETURN(auto queued, store_->ListByState(v1::QUEUED));
  absl::MutexLock lock(&mutex_);
  for (auto& experiment : queued) {
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
        next_submit_order_++, active.experiment.request().gpus(),
        workloads::RequiredGpuCount(active.experiment.request()), active.experiment.sweep_id(),
        active.experiment.sweep_max_concurrent_gpus()});
  }
  if (!queued.empty()) LogLine(absl::StrCat(queued.size(), " queued experiment(s) recovered"));
  return absl::OkStatus();
}

absl::StatusOr<v1::Experiment> ExperimentManager::Submit(v1::ExperimentRequest request) {
  return SubmitInternal(std::move(request), "", 0, 0);
}

absl::Status ExperimentManager::Validate(v1::ExperimentRequest request) {
  ApplyRequestDefaults(options_.limits, inventory_, request);
  return ValidateExperimentRequest(request, inventory_, options_.limits);
}

absl::StatusOr<v1::Experiment> ExperimentManager::SubmitSweepPoint(v1::ExperimentRequest request,
                                                                   const std::string& sweep_id,
                                                                   int point,
                                                                   int max_concurrent_gpus) {
  return SubmitInternal(std::move(request), sweep_id, point, max_concurrent_gpus);
}

absl::StatusOr<std::vector<v1::Experiment>> ExperimentManager::SubmitSweepPoints(
    std::vector<v1::ExperimentRequest> requests, const std::string& sweep_id,
    int max_concurrent_gpus) {
  std::vector<std::pair<v1::Experiment, v1::ExperimentEvent>> created;
  const google::protobuf::Timestamp now = Now();
  for (size_t point = 0; point < requests.size(); ++point) {
    v1::ExperimentRequest& request = requests[point];
    ApplyRequestDefaults(options_.limits, inventory_, request);
    RETURN_IF_ERROR(ValidateExperimentRequest(request, inventory_, options_.limits));
    v1::Experiment experiment;
    experiment.set_sweep_id(sweep_id);
    experiment.set_sweep_point(static_cast<int>(point));
    experiment.set_sweep_max_concurrent_gpus(max_concurrent_gpus);
    experiment.set_state(v1::QUEUED);
    experiment.set_workload(workloads::WorkloadOf(request));
    experiment.set_user(request.user());
    *experiment.mutable_created() = now;
    experiment.set_last_seq(1);
    *experiment.mutable_request() = std::move(request);
    v1::ExperimentEvent first = StateEvent(v1::QUEUED);
    first.set_seq(1);
    *first.mutable_time() = now;
    created.emplace_back(std::move(experiment), std::move(first));
  }
  absl::MutexLock lock(&mutex_);
  if (stopping_) return absl::UnavailableError("gpuprofd is shutting down");
  absl::StatusOr<std::vector<std::string>> stored = store_->CreateMany(created);
  if (!stored.ok()) {
    // Nothing was acknowledged (the points are stored all together or not at all).
    return absl::Status(
        stored.status().code(),
        absl::StrCat("the sweep's points could not be stored, so none was queued: ",
                     stored.status().message(),
                     absl::IsResourceExhausted(stored.status())
                         ? ". The disk holding gpuprofd's database is full: free space there "
                           "and submit again (gpuprofd carries on by itself once it can write)"
                         : ""));
  }
  const std::vector<std::string> ids = *std::move(stored);
  std::vector<v1::Experiment> experiments;
  for (size_t point = 0; point < created.size(); ++point) {
    v1::Experiment& experiment = created[point].first;
    experiment.set_id(ids[point]);
    scheduler_->Enqueue(PendingExperiment{ids[point], experiment.user(),
                                          experiment.request().priority(), next_submit_order_++,
                                          experiment.request().gpus(),
                                          workloads::RequiredGpuCount(experiment.request()),
                                          sweep_id, max_concurrent_gpus});
    active_[ids[point]].experiment = experiment;
    experiments.push_back(std::move(experiment));
  }
  for (v1::Experiment& experiment : experiments) {
    experiment.set_queue_position(scheduler_->QueuePosition(experiment.id()));
  }
  wake_.Signal();
  return experiments;
}

void ExperimentManager::SetSweepPointListener(SweepPointListener listener) {
  absl::MutexLock lock(&mutex_);
  sweep_point_listener_ = std::move(listener);
}

absl::StatusOr<v1::Experiment> ExperimentManager::SubmitInternal(v1::ExperimentRequest request,
                                                                 const std::string& sweep_id,
                                                                 int point,
                                                                 int max_concurrent_gpus) {
  ApplyRequestDefaults(options_.limits, inventory_, request);
  RETURN_IF_ERROR(ValidateExperimentRequest(request, inventory_, options_.limits));
  v1::Experiment experiment;
  experiment.set_sweep_id(sweep_id);
  experiment.set_sweep_point(point);
  experiment.set_sweep_max_concurrent_gpus(max_concurrent_gpus);
  experiment.set_state(v1::QUEUED);
  experiment.set_workload(workloads::WorkloadOf(request));
  experiment.set_user(request.user());
  *experiment.mutable_created() = Now();
  experiment.set_last_seq(1);
  *experiment.mutable_request() = std::move(request);

  v1::ExperimentEvent first = StateEvent(v1::QUEUED);
  first.set_seq(1);
  *first.mutable_time() = experiment.created();
  {
    absl::MutexLock lock(&mutex_);
    if (stopping_) return absl::UnavailableError("gpuprofd is shutting down");
    // Position among what is queued now, plus this one; recomputed live by Get.
    first.mutable_state()->set_queue_position(static_cast<int>(scheduler_->queued_count()) + 1);
  }
  experiment.set_queue_position(first.state().queue_position());
  // Stored without the manager's lock, so that concurrent submissions share one commit (the
  // store's group commit) instead of each waiting for the previous one's fsync.
  absl::StatusOr<std::string> created = store_->Create(experiment, first);
  if (!created.ok()) {
    // Nothing was acknowledged: the client sees the refusal and can submit again.
    return absl::Status(
        created.status().code(),
        absl::StrCat("the experiment could not be stored, so it was not queued: ",
                     created.status().message(),
                     absl::IsResourceExhausted(created.status())
                         ? ". The disk holding gpuprofd's database is full: free space there "
                           "and submit again (gpuprofd carries on by itself once it can write)"
                         : ""));
  }
  const std::string id = *std::move(created);
  experiment.set_id(id);
  absl::MutexLock lock(&mutex_);
  // Stored, so acknowledged: if gpuprofd is stopping, it runs after the restart.
  if (stopping_) return experiment;
  // First come, first served in the order the commits were acknowledged.
  PendingExperiment pending{id,
                            experiment.user(),
                            experiment.request().priority(),
                            next_submit_order_++,
                            experiment.request().gpus(),
                            workloads::RequiredGpuCount(experiment.request()),
                            sweep_id,
                            max_concurrent_gpus};
  scheduler_->Enqueue(std::move(pending));
  experiment.set_queue_position(scheduler_->QueuePosition(id));
  active_[id].experiment = experiment;
  wake_.Signal();
  return experiment;
}

absl::StatusOr<int64_t> ExperimentManager::Subscribe(const std::string& id, int64_t from_seq,
                                                     std::shared_ptr<EventSink> sink) {
  if (from_seq < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("from_seq: got ", from_seq, "; must be >= 0"));
  }
  // Replay and registration happen under one lock, and events are appended under it too, so
  // the stream has neither gaps nor duplicates.
  absl::MutexLock lock(&mutex_);
  ASSIGN_OR_RETURN(auto events, store_->Events(id, from_seq));
  int64_t replayed_seq = from_seq - 1;
  for (const auto& event : events) {
    sink->OnEvent(event);
    replayed_seq = event.seq();
  }
  // Events still waiting for the disk come after the stored ones.
  for (const auto& [experiment, event] : unpersisted_) {
    if (experiment.id() == id && event.seq() > replayed_seq) {
      sink->OnEvent(event);
      replayed_seq = event.seq();
    }
  }
  const auto active = active_.find(id);
  if (active == active_.end() || stopping_) {
    sink->OnEnd();
    return 0;
  }
  const int64_t subscription = next_subscription_++;
  active->second.sinks[subscription] = std::move(sink);
  return subscription;
}

void ExperimentManager::Unsubscribe(const std::string& id, int64_t subscription) {
  absl::MutexLock lock(&mutex_);
  const auto active = active_.find(id);
  if (active != active_.end()) active->second.sinks.erase(subscription);
}

absl::StatusOr<v1::Experiment> ExperimentManager::Cancel(const std::string& id,
                                                         const std::string& reason) {
  absl::MutexLock lock(&mutex_);
  const auto it = active_.find(id);
  if (it == active_.end()) {
    ASSIGN_OR_RETURN(v1::Experiment experiment, GetLocked(id));
    return absl::FailedPreconditionError(absl::StrCat(
        "experiment ", id, " already ended: ", v1::ExperimentState_Name(experiment.state())));
  }
  const std::string why = reason.empty() ? "cancelled by request" : reason;
  Active& active = it->second;
  if (active.experiment.state() == v1::QUEUED) {
    scheduler_->Remove(id);
  } else {
    // The lease stays until the workers are gone (OnWorkerExit releases it).
    KillWorkersLocked(active);
  }
  EndLocked(id, v1::CANCELLED, why, "");
  return GetLocked(id);
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
  LogLine(absl::StrCat("the database can be written again: ", unpersisted_.size(),
                       " delayed write(s) stored; starting experiments again"));
  unpersisted_.clear();
  storage_error_.clear();
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

void ExperimentManager::AppendEventLocked(Active& active, v1::ExperimentEvent event) {
  v1::Experiment& experiment = active.experiment;
  event.set_experiment_id(experiment.id());
  event.set_seq(experiment.last_seq() + 1);
  if (!event.has_time()) *event.mutable_time() = Now();
  ApplyEvent(event, experiment);
  if (unpersisted_.empty()) {
    const absl::Status stored = store_->Update(experiment, event);
    if (!stored.ok()) {
      LogLine(absl::StrCat("could not store event ", event.seq(), " of ", experiment.id(), ": ",
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
  for (auto& [subscription, sink] : active.sinks) sink->OnEvent(event);
  if (event.has_state() && !experiment.sweep_id().empty() && sweep_point_listener_) {
    sweep_point_listener_(experiment);
  }
}

void ExperimentManager::EndLocked(const std::string& id, v1::ExperimentState state,
                                  const std::string& reason, const std::string& stderr_tail) {
  const auto it = active_.find(id);
  if (it == active_.end()) return;
  v1::ExperimentEvent event = StateEvent(state, reason);
  event.mutable_state()->set_worker_stderr_tail(stderr_tail);
  event.mutable_state()->mutable_gpu_ids()->CopyFrom(it->second.experiment.gpu_ids());
  *event.mutable_time() = Now();
  // Metrics first: whoever sees the final event must also find it counted.
  if (observer_ != nullptr) {
    v1::Experiment ended = it->second.experiment;
    ApplyEvent(event, ended);
    observer_->ExperimentEnded(ended);
  }
  AppendEventLocked(it->second, std::move(event));
  for (auto& [subscription, sink] : it->second.sinks) sink->OnEnd();
  active_.erase(it);
}

absl::StatusOr<int64_t> ExperimentManager::StartWorkerLocked(const std::vector<int>& gpus) {
  WorkerLaunch launch;
  launch.binary = options_.worker_binary;
  launch.env = WorkerEnvironment();
  std::vector<std::string> uuids;
  for (int gpu : gpus) uuids.push_back(inventory_.gpus(gpu).uuid());
  // An empty list hides every GPU from CPU workloads.
  launch.env.push_back(absl::StrCat("CUDA_VISIBLE_DEVICES=", absl::StrJoin(uuids, ",")));
  if (options_.limits.allow_test_faults) launch.env.push_back("GPUPROF_ENABLE_TEST_FAULTS=1");
  const int64_t slot_id = next_slot_++;
  ASSIGN_OR_RETURN(
      auto process,
      WorkerProcess::Start(
          launch,
          [this, slot_id](const worker_protocol::WorkerReport& report) {
            OnWorkerReport(slot_id, report);
          },
          [this, slot_id](const WorkerExit& exit) { OnWorkerExit(slot_id, exit); }));
  WorkerSlot& slot = slots_[slot_id];
  slot.process = std::move(process);
  slot.gpus = gpus;
  return slot_id;
}

absl::StatusOr<std::vector<int64_t>> ExperimentManager::AcquireWorkersLocked(
    const std::vector<int>& gpus, bool one_per_rank, bool& reused) {
  reused = false;
  const int ranks = one_per_rank ? static_cast<int>(gpus.size()) : 1;
  // Idle workers that already hold contexts (and, for ranks, a communicator) on exactly this
  // arrangement skip the start-up.
  std::vector<int64_t> warm(ranks, -1);
  for (const auto& [id, slot] : slots_) {
    if (!slot.experiment_id.empty()) continue;
    if (one_per_rank ? slot.group_gpus == gpus : slot.group_gpus.empty() && slot.gpus == gpus) {
      warm[slot.rank] = id;
    }
  }
  if (std::none_of(warm.begin(), warm.end(), [](int64_t id) { return id < 0; })) {
    reused = true;
    return warm;
  }
  // Idle workers on any of these GPUs would share them: stop them.
  const std::set<int> wanted(gpus.begin(), gpus.end());
  std::vector<int64_t> overlapping;
  for (const auto& [id, slot] : slots_) {
    if (!slot.experiment_id.empty()) continue;
    if (std::any_of(slot.gpus.begin(), slot.gpus.end(),
                    [&](int gpu) { return wanted.contains(gpu); })) {
      overlapping.push_back(id);
    }
  }
  for (int64_t id : overlapping) RetireSlotLocked(id);

  std::vector<int64_t> started;
  for (int rank = 0; rank < ranks; ++rank) {
    const std::vector<int> visible = one_per_rank ? std::vector<int>{gpus[rank]} : gpus;
    absl::StatusOr<int64_t> slot_id = StartWorkerLocked(visible);
    if (!slot_id.ok()) {
      for (int64_t id : started) RetireSlotLocked(id);
      return slot_id.status();
    }
    WorkerSlot& slot = slots_[*slot_id];
    slot.rank = rank;
    if (one_per_rank) slot.group_gpus = gpus;
    started.push_back(*slot_id);
  }
  return started;
}

void ExperimentManager::RetireSlotLocked(int64_t slot_id) {
  const auto it = slots_.find(slot_id);
  if (it == slots_.end()) return;
  it->second.process->Kill();
  retired_.push_back(std::move(it->second.process));
  slots_.erase(it);
  wake_.Signal();
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
  bool reused = false;
  const auto slot_ids = AcquireWorkersLocked(dispatch.gpus, one_per_rank, reused);
  if (!slot_ids.ok()) {
    scheduler_->Release(dispatch.id);
    EndLocked(dispatch.id, v1::FAILED,
              absl::StrCat("could not start a worker: ", slot_ids.status().message()), "");
    return;
  }
  active.slots = *slot_ids;
  active.ranks_finished = 0;
  for (int64_t slot_id : active.slots) {
    WorkerSlot& slot = slots_[slot_id];
    slot.experiment_id = dispatch.id;
    ++slot.experiments_run;
  }
  const auto& timeout = active.experiment.request().timeout();
  active.deadline = absl::Now() + absl::Nanoseconds(TimeUtil::DurationToNanoseconds(timeout));

  v1::ExperimentEvent running = StateEvent(v1::RUNNING);
  for (int gpu : dispatch.gpus) running.mutable_state()->add_gpu_ids(gpu);
  AppendEventLocked(active, std::move(running));

  if (active.slots.size() > 1 && !reused) {
    // A new group: rank 0's worker makes the NCCL rendezvous; its report carries on below.
    worker_protocol::WorkerCommand command;
    command.mutable_rendezvous()->set_world_size(static_cast<int>(active.slots.size()));
    (void)slots_[active.slots[0]].process->Send(command);
    return;
  }
  AssignRanksLocked(active, "", reused);
}

void ExperimentManager::AssignRanksLocked(Active& active, const std::string& nccl_unique_id,
                                          bool reused) {
  const int world_size = static_cast<int>(active.slots.size());
  std::vector<int> gpus(active.experiment.gpu_ids().begin(), active.experiment.gpu_ids().end());
  for (int rank = 0; rank < world_size; ++rank) {
    worker_protocol::WorkerCommand command;
    auto& run = *command.mutable_run();
    run.set_experiment_id(active.experiment.id());
    *run.mutable_request() = active.experiment.request();
    // One rank sees its own GPU; a single worker sees them all, in rank order.
    if (world_size > 1) {
      *run.add_gpus() = inventory_.gpus(gpus[rank]);
    } else {
      for (int gpu : gpus) *run.add_gpus() = inventory_.gpus(gpu);
    }
    *run.mutable_host() = inventory_.host();
    for (const v1::GpuLink& link : inventory_.links()) {
      if (std::find(gpus.begin(), gpus.end(), link.gpu_a()) != gpus.end() &&
          std::find(gpus.begin(), gpus.end(), link.gpu_b()) != gpus.end()) {
        *run.add_links() = link;
      }
    }
    run.set_worker_reused(reused);
    run.set_rank(rank);
    run.set_world_size(world_size);
    if (world_size > 1) {
      run.set_nccl_unique_id(nccl_unique_id);
      run.set_reuse_communicator(reused);
    }
    // A failed send means the worker died; its exit callback fails the experiment.
    (void)slots_[active.slots[rank]].process->Send(command);
  }
}

void ExperimentManager::KillWorkersLocked(const Active& active) {
  for (int64_t slot_id : active.slots) {
    const auto slot = slots_.find(slot_id);
    if (slot != slots_.end() && slot->second.experiment_id == active.experiment.id()) {
      slot->second.process->Kill();
    }
  }
}

void ExperimentManager::ReleaseIfNoWorkerLocked(const std::string& id) {
  for (const auto& [slot_id, slot] : slots_) {
    if (slot.experiment_id == id) return;
  }
  scheduler_->Release(id);
  wake_.Signal();
}

void ExperimentManager::OnWorkerReport(int64_t slot_id,
                                       const worker_protocol::WorkerReport& report) {
  absl::MutexLock lock(&mutex_);
  const auto slot = slots_.find(slot_id);
  if (slot == slots_.end() || slot->second.experiment_id.empty()) return;
  const std::string id = slot->second.experiment_id;
  const int rank = slot->second.rank;
  const auto found = active_.find(id);
  // Cancelled (or timing out): what the dying worker still says no longer counts.
  if (found == active_.end() || found->second.ending || found->second.storage_failed) return;
  Active& active = found->second;
  ++active.reports;
  active.report_bytes += static_cast<int64_t>(report.ByteSizeLong());
  if (active.reports > options_.max_reports_per_experiment ||
      active.report_bytes > options_.max_report_bytes_per_experiment) {
    if (observer_ != nullptr) observer_->WorkerFailed(/*timed_out=*/false);
    KillWorkersLocked(active);
    EndLocked(id, v1::FAILED,
              absl::StrCat("rank ", rank, "'s worker flooded its report pipe (", active.reports,
                           " reports, ", active.report_bytes,
                           " bytes; the limits per experiment are ",
                           options_.max_reports_per_experiment, " reports and ",
                           options_.max_report_bytes_per_experiment,
                           " bytes) and was killed"),
              slot->second.process->StderrTail());
    return;
  }
  if (report.has_rendezvous()) {
    if (!report.rendezvous().error().empty()) {
      KillWorkersLocked(active);
      EndLocked(id, v1::FAILED,
                absl::StrCat("rank 0 could not create the NCCL rendezvous: ",
                             report.rendezvous().error()),
                slot->second.process->StderrTail());
      return;
    }
    AssignRanksLocked(active, report.rendezvous().nccl_unique_id(), /*reused=*/false);
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
  slot->second.experiment_id.clear();
  slot->second.idle_since = absl::Now();
  const bool group = active.slots.size() > 1;
  if (finished.ok()) {
    if (++active.ranks_finished == static_cast<int>(active.slots.size())) {
      EndLocked(id, v1::FINISHED, "", "");
    }
  } else {
    // One rank failing ends the group: the others may be waiting on it inside NCCL.
    KillWorkersLocked(active);
    EndLocked(id, v1::FAILED,
              group ? absl::StrCat("rank ", rank, ": ", finished.error()) : finished.error(),
              slot->second.process->StderrTail());
  }
  // A worker that saw an error may hold a broken CUDA context or communicator: never reuse it.
  if (!finished.ok() || finished.must_not_reuse()) RetireSlotLocked(slot_id);
  ReleaseIfNoWorkerLocked(id);
  wake_.Signal();
}

void ExperimentManager::OnWorkerExit(int64_t slot_id, const WorkerExit& exit) {
  absl::MutexLock lock(&mutex_);
  const auto slot = slots_.find(slot_id);
  if (slot == slots_.end()) return;  // retired on purpose
  const std::string id = slot->second.experiment_id;
  const int rank = slot->second.rank;
  // The process is gone; its object is destroyed on the control thread.
  retired_.push_back(std::move(slot->second.process));
  slots_.erase(slot);
  if (!id.empty()) {
    const auto active = active_.find(id);
    if (active != active_.end()) {
      const bool group = active->second.slots.size() > 1;
      const std::string who = group ? absl::StrCat("rank ", rank, "'s worker process")
                                    : std::string("the worker process");
      if (observer_ != nullptr) observer_->WorkerFailed(/*timed_out=*/active->second.ending);
      KillWorkersLocked(active->second);
      if (active->second.ending) {
        EndLocked(id, v1::TIMED_OUT,
                  absl::StrCat("ran longer than its timeout of ",
                               absl::FormatDuration(absl::Nanoseconds(TimeUtil::DurationToNanoseconds(
                                   active->second.experiment.request().timeout()))),
                               "; ", group ? "every rank's worker was" : "the worker was",
                               " killed"),
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
      KillWorkersLocked(active);
      EndLocked(id, v1::FAILED,
                absl::StrCat("gpuprofd could not store this experiment's events (",
                             storage_error_, "), so it stopped the run rather than lose them"),
                "");
    }
    // While writes wait for the disk, nothing new starts: its events could not be kept.
    if (unpersisted_.empty()) {
      for (const Dispatch& dispatch : scheduler_->DispatchReady(absl::Now())) {
        StartLocked(dispatch);
      }
    }

    const absl::Time now = absl::Now();
    absl::Time next_wake = now + absl::Seconds(1);
    for (auto& [id, active] : active_) {
      if (active.slots.empty() || active.ending) continue;
      if (active.deadline <= now) {
        active.ending = true;
        KillWorkersLocked(active);
      } else {
        next_wake = std::min(next_wake, active.deadline);
      }
    }
    std::vector<int64_t> expired;
    for (const auto& [id, slot] : slots_) {
      if (!slot.experiment_id.empty()) continue;
      if (slot.idle_since + options_.worker_idle_timeout <= now) {
        expired.push_back(id);
      } else {
        next_wake = std::min(next_wake, slot.idle_since + options_.worker_idle_timeout);
      }
    }
    for (int64_t id : expired) RetireSlotLocked(id);

    if (!retired_.empty()) {
      auto retired = std::move(retired_);
      retired_.clear();
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
      LogLine(absl::StrCat(unpersisted_.size(), " write(s) could not be stored before exit (",
                           storage_error_, "); the experiments they belong to will show as "
                           "interrupted after a restart"));
    }
    // Queued experiments stay queued in the store; their watchers reattach after restart.
    for (auto& [id, active] : active_) {
      for (auto& [subscription, sink] : active.sinks) sink->OnEnd();
      active.sinks.clear();
    }
    wake_.SignalAll();
  }
  if (control_thread_.joinable()) control_thread_.join();
  std::vector<std::unique_ptr<WorkerProcess>> retired;
  {
    absl::MutexLock lock(&mutex_);
    std::vector<int64_t> slot_ids;
    for (const auto& [id, slot] : slots_) slot_ids.push_back(id);
    for (int64_t id : slot_ids) RetireSlotLocked(id);
    retired = std::move(retired_);
    retired_.clear();
  }
  retired.clear();
}

}  // namespace gpuprof::daemon
