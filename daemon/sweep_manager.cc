#include "daemon/sweep_manager.h"

#include <cstdio>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/experiment_states.h"
#include "common/status_macros.h"
#include "daemon/admission/baseline_ownership.h"
#include "daemon/admission/custom_kernel_audit.h"
#include "daemon/store/sweep_point_table.h"
#include "google/protobuf/util/time_util.h"
#include "sweep/sweep_expansion.h"

namespace gpuprof::daemon {
namespace {

using ::google::protobuf::util::TimeUtil;

google::protobuf::Timestamp Now() {
  return TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(absl::Now()));
}

void LogLine(const std::string& line) { std::fprintf(stderr, "gpuprofd: %s\n", line.c_str()); }

// Experiments only move forward: queued, running, ended.
int StateRank(v1::ExperimentState state) {
  if (state == v1::QUEUED) return 1;
  if (state == v1::RUNNING) return 2;
  if (IsTerminalState(state)) return 3;
  return 0;
}

// A point's experiment as the sweep keeps it: the provenance, a custom kernel's source and its
// SASS stay with the experiment.
v1::Experiment Summary(const v1::Experiment& experiment) {
  v1::Experiment summary = experiment;
  SummarizeForListing(summary);
  if (!summary.result().IsInitialized() || summary.result().ByteSizeLong() == 0) {
    summary.clear_result();
  }
  return summary;
}

void Recount(v1::Sweep& sweep, const std::vector<v1::SweepPoint>& points) {
  int queued = 0, running = 0, finished = 0, failed = 0;
  for (const v1::SweepPoint& point : points) {
    if (point.state() == v1::RUNNING) {
      ++running;
    } else if (point.state() == v1::FINISHED) {
      ++finished;
    } else if (IsTerminalState(point.state())) {
      ++failed;
    } else {
      ++queued;
    }
  }
  sweep.set_points_queued(queued);
  sweep.set_points_running(running);
  sweep.set_points_finished(finished);
  sweep.set_points_failed(failed);
  sweep.set_points_total(static_cast<int>(points.size()));
}

// The sweep with one page of `points`, as GetSweep returns it.
absl::StatusOr<v1::Sweep> WithPointPage(const v1::Sweep& sweep,
                                        const std::vector<v1::SweepPoint>& points, int page_size,
                                        const std::string& page_token) {
  ASSIGN_OR_RETURN(store::SweepPointPage page,
                   store::PageOfSweepPoints(points, page_size, page_token));
  v1::Sweep paged = sweep;
  for (v1::SweepPoint& point : page.points) *paged.add_points() = std::move(point);
  paged.set_next_points_page_token(std::move(page.next_page_token));
  return paged;
}

absl::Status CheckBaselineName(const std::string& name) {
  const bool valid_characters = std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.';
  });
  if (name.empty() || name.size() > 128 || !valid_characters || absl::StartsWith(name, "exp-") ||
      absl::StartsWith(name, "swp-")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "name: \"", name,
        "\" is not a baseline name; use 1 to 128 letters, digits, '-', '_' or '.', not "
        "starting with exp- or swp- (those are ids)"));
  }
  return absl::OkStatus();
}

}  // namespace

SweepManager::SweepManager(ExperimentManager* experiments, SweepObserver* observer)
    : experiments_(experiments),
      observer_(observer),
      store_(experiments->store()),
      fan_out_("sweep", experiments->watch_slots(), [experiments](const absl::Status& refusal) {
        experiments->CountWatchRefusal(refusal);
      }) {}

absl::StatusOr<std::unique_ptr<SweepManager>> SweepManager::Create(ExperimentManager* experiments,
                                                                   SweepObserver* observer) {
  std::unique_ptr<SweepManager> manager(new SweepManager(experiments, observer));
  // Listen before resuming: whatever changes while the stored state is read arrives after it
  // and is applied (or found stale) in order.
  SweepManager* self = manager.get();
  experiments->SetSweepPointListener([self](const v1::Experiment& experiment) {
    absl::MutexLock lock(&self->pending_mutex_);
    if (self->follow_stopping_) return;
    self->pending_.push_back(experiment);
    self->pending_changed_.Signal();
  });
  RETURN_IF_ERROR(manager->Resume());
  manager->follow_thread_ = std::thread([self] { self->FollowLoop(); });
  return manager;
}

SweepManager::~SweepManager() { Shutdown(); }

void SweepManager::Shutdown() {
  experiments_->SetSweepPointListener(nullptr);
  {
    absl::MutexLock lock(&pending_mutex_);
    follow_stopping_ = true;
    pending_changed_.SignalAll();
  }
  if (follow_thread_.joinable()) follow_thread_.join();
  absl::MutexLock lock(&mutex_);
  if (stopping_) return;
  stopping_ = true;
  // Running sweeps stay running in the store; their watchers reattach after a restart.
  for (auto& [id, active] : active_) {
    EventFanOut<v1::SweepEvent>::EndAll(active.sinks);
    active.sinks.clear();
  }
}

absl::Status SweepManager::Resume() {
  // Whatever happens here, experiments start afterwards: the interrupted points queued again
  // below have taken the places kept for them.
  const absl::Cleanup reruns_queued = [this] { experiments_->RecoveredRerunsQueued(); };
  ASSIGN_OR_RETURN(std::vector<v1::Sweep> sweeps, store_.ListSweepsByState(v1::SWEEP_RUNNING));
  absl::MutexLock lock(&mutex_);
  int rerun = 0, submitted = 0;
  for (v1::Sweep& stored : sweeps) {
    const std::string id = stored.id();
    ActiveSweep& active = active_[id];
    active.points.reserve(stored.points_size());
    for (v1::SweepPoint& point : *stored.mutable_points()) active.points.push_back(std::move(point));
    stored.clear_points();
    active.sweep = std::move(stored);
    if (observer_ != nullptr) observer_->SweepStarted(active.sweep);
    ASSIGN_OR_RETURN(auto links, store_.SweepPointExperiments(id));
    // Points are rebuilt from the stored request: expansion is deterministic.
    const auto expanded = sweep::ExpandSweep(active.sweep.request());
    const bool cancelling = active.sweep.cancel_requested();
    const int point_count = static_cast<int>(active.points.size());
    for (int index = 0; index < point_count; ++index) {
      v1::SweepPoint& point = active.points[index];
      const bool can_run = !cancelling && expanded.ok() &&
                           static_cast<int>(expanded->size()) == point_count;
      const auto link = links.find(index);
      if (link == links.end()) {
        // Stopped between storing the sweep and queueing this point.
        if (can_run) {
          SubmitPointLocked(active, index, (*expanded)[index].request, /*announce=*/true);
          ++submitted;
        } else if (!IsTerminalState(point.state())) {
          point.set_state(v1::CANCELLED);
          v1::SweepEvent event;
          *event.mutable_point() = point;
          AppendEventLocked(active, std::move(event));
        }
        continue;
      }
      const std::vector<std::string>& attempts = link->second;
      point.set_experiment_id(attempts.back());
      point.set_attempt(static_cast<int>(attempts.size()));
      point.clear_earlier_experiment_ids();
      for (size_t i = 0; i + 1 < attempts.size(); ++i)
        point.add_earlier_experiment_ids(attempts[i]);
      absl::StatusOr<v1::Experiment> experiment = store_.Get(attempts.back());
      if (!experiment.ok()) {
        LogLine(absl::StrCat("sweep ", id, " point ", index, ": ", experiment.status().ToString()));
        continue;
      }
      if (experiment->state() == v1::INTERRUPTED && can_run && point.attempt() < kMaxAttempts) {
        ApplyPointLocked(active, *experiment);
        SubmitPointLocked(active, index, (*expanded)[index].request, /*announce=*/true);
        ++rerun;
        continue;
      }
      if (cancelling && !IsTerminalState(experiment->state())) {
        auto cancelled = experiments_->Cancel(
            experiment->id(), active.sweep.reason(),
            Actor{active.sweep.user(), "sweep cancel finished after a restart", /*admin=*/true});
        if (cancelled.ok()) *experiment = *std::move(cancelled);
      }
      ApplyPointLocked(active, *experiment);
    }
    // The points' experiment ids and attempts were rebuilt from the links: stored once, with
    // whatever changed while the daemon was away.
    const absl::Status stored_points = store_.UpdateSweep(active.sweep, v1::SweepEvent(), active.points);
    if (!stored_points.ok()) {
      LogLine(absl::StrCat("could not persist the points of ", id, ": ", stored_points.ToString()));
    }
    MaybeEndLocked(id);
  }
  if (!sweeps.empty()) {
    LogLine(absl::StrCat(sweeps.size(), " running sweep(s) resumed; ", rerun,
                         " interrupted point(s) queued again, ", submitted,
                         " point(s) queued for the first time"));
  }
  return absl::OkStatus();
}

void SweepManager::FollowLoop() {
  while (true) {
    v1::Experiment experiment;
    {
      absl::MutexLock lock(&pending_mutex_);
      while (pending_.empty() && !follow_stopping_) pending_changed_.Wait(&pending_mutex_);
      if (follow_stopping_) return;
      experiment = std::move(pending_.front());
      pending_.pop_front();
    }
    absl::MutexLock lock(&mutex_);
    OnPointChangedLocked(experiment);
  }
}

void SweepManager::OnPointChangedLocked(const v1::Experiment& experiment) {
  if (stopping_) return;
  // A daemon stop interrupts it; the restart runs the point again.
  if (experiment.state() == v1::INTERRUPTED) return;
  const auto it = active_.find(experiment.sweep_id());
  if (it == active_.end()) return;
  if (ApplyPointLocked(it->second, experiment)) MaybeEndLocked(experiment.sweep_id());
}

bool SweepManager::ApplyPointLocked(ActiveSweep& active, const v1::Experiment& experiment) {
  const int index = experiment.sweep_point();
  if (index < 0 || index >= static_cast<int>(active.points.size())) return false;
  v1::SweepPoint& point = active.points[index];
  if (point.experiment_id() != experiment.id()) return false;  // an earlier attempt
  const int new_rank = StateRank(experiment.state());
  const int old_rank = StateRank(point.state());
  // A preempted point goes back from RUNNING to QUEUED: within one experiment a newer event
  // wins, except that an ended point stays ended.
  if (new_rank < old_rank &&
      (IsTerminalState(point.state()) || experiment.last_seq() <= point.experiment().last_seq())) {
    return false;
  }
  if (new_rank == old_rank && experiment.last_seq() <= point.experiment().last_seq()) {
    return false;
  }
  point.set_state(experiment.state());
  *point.mutable_experiment() = Summary(experiment);
  v1::SweepEvent event;
  *event.mutable_point() = point;
  AppendEventLocked(active, std::move(event));
  return true;
}

void SweepManager::SubmitPointLocked(ActiveSweep& active, int index,
                                     const v1::ExperimentRequest& request, bool announce) {
  v1::SweepPoint& point = active.points[index];
  absl::StatusOr<v1::Experiment> submitted = experiments_->SubmitSweepPoint(
      request, active.sweep.id(), index, active.sweep.request().max_concurrent_gpus(),
      /*rerun_of=*/point.experiment_id());
  if (!point.experiment_id().empty()) point.add_earlier_experiment_ids(point.experiment_id());
  if (submitted.ok()) {
    point.set_experiment_id(submitted->id());
    point.set_attempt(point.attempt() + 1);
    point.set_state(v1::QUEUED);
    *point.mutable_experiment() = Summary(*submitted);
  } else {
    point.clear_experiment_id();
    point.set_state(v1::FAILED);
    point.mutable_experiment()->Clear();
    point.mutable_experiment()->set_state(v1::FAILED);
    point.mutable_experiment()->set_reason(
        absl::StrCat("could not queue the point: ", submitted.status().message()));
  }
  if (!announce) return;
  v1::SweepEvent event;
  *event.mutable_point() = point;
  AppendEventLocked(active, std::move(event));
}

void SweepManager::AppendEventLocked(ActiveSweep& active, v1::SweepEvent event) {
  v1::Sweep& sweep = active.sweep;
  Recount(sweep, active.points);
  event.set_sweep_id(sweep.id());
  event.set_seq(sweep.last_seq() + 1);
  *event.mutable_time() = Now();
  event.set_state(sweep.state());
  event.set_points_total(sweep.points_total());
  event.set_points_finished(sweep.points_finished());
  event.set_points_failed(sweep.points_failed());
  event.set_points_running(sweep.points_running());
  sweep.set_last_seq(event.seq());
  // The sweep's small row and the changed point's row, not every point.
  const absl::Status stored =
      event.has_point() ? store_.UpdateSweep(sweep, event, {event.point()})
                        : store_.UpdateSweep(sweep, event);
  if (!stored.ok()) {
    LogLine(absl::StrCat("could not persist event ", event.seq(), " of ", sweep.id(), ": ",
                         stored.ToString()));
  }
  EventFanOut<v1::SweepEvent>::Publish(active.sinks, event);
}

void SweepManager::MaybeEndLocked(const std::string& id) {
  const auto it = active_.find(id);
  if (it == active_.end()) return;
  ActiveSweep& active = it->second;
  v1::Sweep& sweep = active.sweep;
  for (const v1::SweepPoint& point : active.points) {
    if (!IsTerminalState(point.state())) return;
  }
  Recount(sweep, active.points);
  v1::SweepEvent event;
  if (sweep.cancel_requested()) {
    sweep.set_state(v1::SWEEP_CANCELLED);
    event.set_ended(sweep.reason());
  } else if (sweep.points_finished() == sweep.points_total()) {
    sweep.set_state(v1::SWEEP_FINISHED);
    event.set_ended(absl::StrCat("all ", sweep.points_total(), " points finished"));
  } else {
    sweep.set_state(v1::SWEEP_INCOMPLETE);
    sweep.set_reason(absl::StrCat(sweep.points_failed(), " of ", sweep.points_total(),
                                  " points did not finish"));
    event.set_ended(sweep.reason());
  }
  *sweep.mutable_finished() = Now();
  if (observer_ != nullptr) observer_->SweepEnded(sweep);
  AppendEventLocked(active, std::move(event));
  EventFanOut<v1::SweepEvent>::EndAll(active.sinks);
  active_.erase(it);
}

absl::StatusOr<v1::Sweep> SweepManager::Submit(v1::SweepRequest request) {
  const std::string user = !request.user().empty() ? request.user() : request.base().user();
  return Submit(std::move(request), Actor{user, "in-process call", /*admin=*/true});
}

absl::StatusOr<v1::Sweep> SweepManager::Submit(v1::SweepRequest request, const Actor& actor) {
  RETURN_IF_ERROR(ValidateSweepRequestText(request));
  if (request.user().empty()) request.set_user(request.base().user());
  if (request.user().empty()) request.set_user(actor.user);
  if (request.user().empty()) {
    return absl::InvalidArgumentError("user: must be set (the CLI sets it from $USER)");
  }
  request.mutable_base()->set_user(request.user());
  if (request.max_concurrent_gpus() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_concurrent_gpus: got ", request.max_concurrent_gpus(), "; must be >= 0 (0: no cap)"));
  }
  ASSIGN_OR_RETURN(std::vector<sweep::ExpandedPoint> points, sweep::ExpandSweep(request));
  // The one admission step of every submission, before anything is stored: identity, policy,
  // every point validated, quotas, and every point's queue place (and the submit token) taken
  // at once, so that parallel sweeps cannot all pass a check only some fit. Held until the
  // points are queued, given back if they never are.
  AdmissionRequest submission{actor, request.user(), {}, /*sweep=*/true, {}};
  for (const sweep::ExpandedPoint& point : points) {
    submission.requests.push_back(point.request);
    submission.point_parameters.push_back(sweep::DescribeParameters(point.parameters));
  }
  ASSIGN_OR_RETURN(Admission admission, experiments_->admission().Admit(std::move(submission)));
  const std::string custom_kernels = CustomKernelAuditDetail(admission.requests());
  v1::Sweep sweep;
  *sweep.mutable_request() = request;
  sweep.set_state(v1::SWEEP_RUNNING);
  sweep.set_user(request.user());
  if (request.user() != actor.user) sweep.set_submitted_by(actor.user);
  sweep.set_authenticated_by(actor.authenticated_by);
  *sweep.mutable_created() = Now();
  std::vector<v1::SweepPoint> sweep_points(points.size());
  for (size_t index = 0; index < points.size(); ++index) {
    v1::SweepPoint& point = sweep_points[index];
    point.set_index(static_cast<int>(index));
    for (const auto& [name, value] : points[index].parameters) {
      (*point.mutable_parameters())[name] = value;
    }
    point.set_state(v1::QUEUED);
  }
  Recount(sweep, sweep_points);
  sweep.set_last_seq(1);
  v1::SweepEvent first;
  first.set_seq(1);
  *first.mutable_time() = sweep.created();
  first.set_state(v1::SWEEP_RUNNING);
  first.set_points_total(sweep.points_total());
  // The sweep as created, with every point: the store keeps them in rows of their own.
  v1::Sweep with_points = sweep;
  for (const v1::SweepPoint& point : sweep_points) *with_points.add_points() = point;
  *first.mutable_created() = with_points;

  absl::MutexLock lock(&mutex_);
  if (stopping_) return absl::UnavailableError("gpuprofd is shutting down");
  absl::StatusOr<std::string> created = store_.CreateSweep(std::move(with_points), first);
  if (!created.ok()) {
    // Nothing was acknowledged or queued: the client sees the refusal and can submit again.
    return NotStoredError(created.status(),
                          "the sweep could not be stored, so none of its points was queued");
  }
  const std::string id = *std::move(created);
  sweep.set_id(id);
  ActiveSweep& active = active_[id];
  active.sweep = std::move(sweep);
  active.points = std::move(sweep_points);
  if (observer_ != nullptr) observer_->SweepStarted(active.sweep);
  {
    const bool on_behalf = request.user() != actor.user;
    v1::AuditEntry entry;
    entry.set_actor(actor.user);
    if (on_behalf) entry.set_on_behalf_of(request.user());
    entry.set_action("sweep-submit");
    entry.set_experiment_id(id);
    entry.set_detail(absl::StrCat(
        on_behalf ? absl::StrCat("admin ", actor.user, " on behalf of ", request.user(), ": ") : "",
        points.size(), " point(s)", custom_kernels));
    entry.set_authenticated_by(actor.authenticated_by);
    experiments_->RecordAudit(std::move(entry));
  }
  // One transaction for every point: a 100-point sweep costs one sync, not a hundred.
  absl::StatusOr<std::vector<v1::Experiment>> queued_points = experiments_->SubmitSweepPoints(
      std::move(admission), id, active.sweep.request().max_concurrent_gpus());
  if (queued_points.ok()) {
    for (size_t index = 0; index < queued_points->size(); ++index) {
      v1::SweepPoint& point = active.points[index];
      point.set_experiment_id((*queued_points)[index].id());
      point.set_attempt(1);
      *point.mutable_experiment() = Summary((*queued_points)[index]);
    }
  } else if (absl::IsUnavailable(queued_points.status())) {
    // Stopping: the points are queued when the daemon starts again (Resume).
    LogLine(absl::StrCat("the points of ", id,
                         " wait for the next start: ", queued_points.status().ToString()));
  } else {
    for (v1::SweepPoint& point : active.points) {
      point.set_state(v1::FAILED);
      point.mutable_experiment()->set_state(v1::FAILED);
      point.mutable_experiment()->set_reason(
          absl::StrCat("could not queue the point: ", queued_points.status().message()));
    }
  }
  Recount(active.sweep, active.points);
  // One write for the queued points; their links to the sweep were stored with each one.
  const absl::Status stored = store_.UpdateSweep(active.sweep, v1::SweepEvent(), active.points);
  if (!stored.ok()) LogLine(absl::StrCat("could not persist ", id, ": ", stored.ToString()));
  absl::StatusOr<v1::Sweep> queued = WithPointPage(active.sweep, active.points, 0, "");
  MaybeEndLocked(id);
  return queued;
}

absl::StatusOr<v1::Sweep> SweepManager::Get(const std::string& id, int points_page_size,
                                            const std::string& points_page_token) {
  absl::MutexLock lock(&mutex_);
  const auto it = active_.find(id);
  if (it != active_.end()) {
    return WithPointPage(it->second.sweep, it->second.points, points_page_size,
                         points_page_token);
  }
  return store_.GetSweepPage(id, points_page_size, points_page_token);
}

absl::StatusOr<SweepPage> SweepManager::List(const std::string& user, int page_size,
                                             const std::string& page_token) {
  return store_.ListSweeps(user, page_size, page_token);
}

absl::StatusOr<v1::Sweep> SweepManager::Cancel(const std::string& id, const std::string& reason) {
  ASSIGN_OR_RETURN(v1::Sweep sweep, Get(id));
  return Cancel(id, reason, Actor{sweep.user(), "in-process call", /*admin=*/true});
}

absl::StatusOr<v1::Sweep> SweepManager::Cancel(const std::string& id, const std::string& reason,
                                               const Actor& actor) {
  absl::MutexLock lock(&mutex_);
  const auto it = active_.find(id);
  if (it == active_.end()) {
    ASSIGN_OR_RETURN(v1::Sweep sweep, store_.GetSweep(id));
    return absl::FailedPreconditionError(
        absl::StrCat("sweep ", id, " already ended: ", v1::SweepState_Name(sweep.state())));
  }
  ActiveSweep& active = it->second;
  const std::string owner = active.sweep.user();
  if (!actor.admin && owner != actor.user) {
    return experiments_->admission().Refuse(
        actor, owner, "not-owner",
        absl::PermissionDeniedError(absl::StrCat("sweep ", id, " belongs to ", owner,
                                                 "; only its owner or an admin may cancel it "
                                                 "(you are ",
                                                 actor.user, ", ", actor.authenticated_by, ")")));
  }
  RETURN_IF_ERROR(CheckPrintableText("reason", reason));
  active.sweep.set_cancel_requested(true);
  active.sweep.set_reason(reason.empty() ? absl::StrCat("cancelled by ", actor.user) : reason);
  {
    v1::AuditEntry entry;
    entry.set_actor(actor.user);
    if (owner != actor.user) entry.set_on_behalf_of(owner);
    entry.set_action("sweep-cancel");
    entry.set_experiment_id(id);
    entry.set_detail(active.sweep.reason());
    entry.set_authenticated_by(actor.authenticated_by);
    experiments_->RecordAudit(std::move(entry));
  }
  // Durable before any point is touched: a restart in between finishes the cancel.
  RETURN_IF_ERROR(store_.UpdateSweep(active.sweep, v1::SweepEvent()));
  for (size_t index = 0; index < active.points.size(); ++index) {
    const v1::SweepPoint& point = active.points[index];
    if (IsTerminalState(point.state()) || point.experiment_id().empty()) continue;
    const std::string experiment_id = point.experiment_id();
    absl::StatusOr<v1::Experiment> cancelled =
        experiments_->Cancel(experiment_id, active.sweep.reason(), actor);
    // Already ended (its news not applied yet): take its stored state.
    if (!cancelled.ok()) cancelled = experiments_->Get(experiment_id);
    if (cancelled.ok()) ApplyPointLocked(active, *cancelled);
  }
  absl::StatusOr<v1::Sweep> result = WithPointPage(active.sweep, active.points, 0, "");
  MaybeEndLocked(id);
  const auto ended = store_.GetSweepPage(id, 0, "");
  return ended.ok() ? *ended : result;
}

absl::StatusOr<int64_t> SweepManager::Subscribe(const std::string& id, int64_t from_seq,
                                                std::shared_ptr<SweepEventSink> sink,
                                                const Watcher& watcher) {
  return SubscribeFromSeq(*this, id, from_seq, sink, watcher);
}

absl::StatusOr<CatchUp> SweepManager::CatchUpStream(const std::string& id, int64_t from_seq,
                                                    const std::shared_ptr<SweepEventSink>& sink,
                                                    const Watcher& watcher, int64_t& handle) {
  // Events are appended under the same lock: the stream has neither gaps nor duplicates.
  absl::MutexLock lock(&mutex_);
  const auto active = active_.find(id);
  const bool live = active != active_.end() && !stopping_;
  return fan_out_.CatchUpTo(
      id, live ? active->second.sweep.user() : "", live ? &active->second.sinks : nullptr,
      from_seq,
      [&](int64_t from, int64_t max_events) {
        return store_.SweepEvents(id, from, {.max_events = max_events});
      },
      sink, watcher, handle);
}

absl::StatusOr<std::vector<v1::SweepEvent>> SweepManager::EventPage(const std::string& id,
                                                                    int64_t from_seq,
                                                                    store::EventPageLimit limit) {
  return store_.SweepEvents(id, from_seq, limit);
}

void SweepManager::Unsubscribe(const std::string& id, int64_t subscription) {
  absl::MutexLock lock(&mutex_);
  const auto active = active_.find(id);
  fan_out_.Unsubscribe(active != active_.end() ? &active->second.sinks : nullptr, subscription);
}

absl::StatusOr<v1::Baseline> SweepManager::SaveBaseline(const v1::SaveBaselineRequest& request,
                                                        const Actor& actor) {
  RETURN_IF_ERROR(CheckBaselineName(request.name()));
  RETURN_IF_ERROR(ValidateBaselineText(request));
  if (absl::StartsWith(request.target_id(), "exp-")) {
    RETURN_IF_ERROR(store_.Get(request.target_id()).status());
  } else if (absl::StartsWith(request.target_id(), "swp-")) {
    RETURN_IF_ERROR(store_.GetSweep(request.target_id()).status());
  } else {
    return absl::InvalidArgumentError(absl::StrCat("target_id: \"", request.target_id(),
                                                   "\" is neither an experiment (exp-...) nor a "
                                                   "sweep (swp-...)"));
  }
  v1::Baseline baseline;
  baseline.set_name(request.name());
  baseline.set_target_id(request.target_id());
  baseline.set_description(request.description());
  *baseline.mutable_created() = Now();
  const BaselineEditor editor{actor.user, actor.authenticated_by, actor.admin};
  // The ownership check runs inside the store's write transaction: nothing can replace or
  // delete the baseline between the check and the write.
  std::string owner;
  v1::Baseline saved;
  const absl::Status status = store_.ChangeBaseline(
      request.name(),
      [&](const v1::Baseline* stored) -> absl::StatusOr<ExperimentStore::BaselineWrite> {
        if (stored != nullptr) owner = stored->owner();
        auto write = DecideBaselineSave(stored, baseline, request.replace(), editor);
        if (write.ok()) saved = *write->baseline;
        return write;
      });
  if (absl::IsPermissionDenied(status)) {
    return experiments_->admission().Refuse(actor, owner, kBaselineNotOwner, status);
  }
  RETURN_IF_ERROR(status);
  return saved;
}

absl::StatusOr<v1::Baseline> SweepManager::DeleteBaseline(const std::string& name,
                                                          const Actor& actor) {
  const BaselineEditor editor{actor.user, actor.authenticated_by, actor.admin};
  std::string owner;
  v1::Baseline deleted;
  const absl::Status status = store_.ChangeBaseline(
      name, [&](const v1::Baseline* stored) -> absl::StatusOr<ExperimentStore::BaselineWrite> {
        if (stored != nullptr) {
          owner = stored->owner();
          deleted = *stored;
        }
        return DecideBaselineDelete(stored, name, editor);
      });
  if (absl::IsPermissionDenied(status)) {
    return experiments_->admission().Refuse(actor, owner, kBaselineNotOwner, status);
  }
  RETURN_IF_ERROR(status);
  return deleted;
}

absl::StatusOr<std::vector<v1::Baseline>> SweepManager::ListBaselines(const std::string& name) {
  return store_.ListBaselines(name);
}

}  // namespace gpuprof::daemon
