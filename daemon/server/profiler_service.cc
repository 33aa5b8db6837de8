#include "daemon/server/profiler_service.h"

#include <algorithm>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "daemon/admission/request_form.h"
#include "daemon/metrics/latency_phases.h"
#include "daemon/capture/capture_reports.h"

namespace gpuprof::daemon {
namespace {

using ExperimentStream = EventStreamReactor<v1::ExperimentEvent, ExperimentManager>;

}  // namespace

ProfilerService::ProfilerService(ExperimentManager* manager, SweepManager* sweeps,
                                 const Authenticator* authenticator, RpcObserver observer,
                                 int call_threads, StreamLimits stream_limits)
    : manager_(manager),
      sweeps_(sweeps),
      authenticator_(authenticator),
      observer_(std::move(observer)),
      stream_budget_(stream_limits.buffer_bytes_total),
      // A stall is noticed within a quarter of the timeout, and within a second.
      stream_watchdog_(std::min(stream_limits.stall_timeout / 4, absl::Seconds(1)),
                       stream_budget_),
      streams_{observer_, stream_limits, &stream_budget_, &stream_watchdog_, &pool_},
      pool_(call_threads) {}

absl::StatusOr<Caller> ProfilerService::Identify(grpc::CallbackServerContext* context) const {
  if (authenticator_ == nullptr) {
    return Caller{.user = "", .authenticated_by = "in-process", .admin = true};
  }
  return authenticator_->Identify(*context);
}

namespace {
Actor ActorOf(const Caller& caller) {
  return Actor{caller.user, caller.authenticated_by, caller.admin};
}
Watcher WatcherOf(const Caller& caller) { return Watcher{caller.user, caller.admin}; }
}  // namespace

grpc::ServerUnaryReactor* ProfilerService::FinishUnary(grpc::CallbackServerContext* context,
                                                       const std::string& method,
                                                       const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const grpc::Status grpc_status = ToGrpcStatus(status);
  if (observer_) observer_(method, grpc_status.error_code());
  reactor->Finish(grpc_status);
  return reactor;
}

grpc::ServerUnaryReactor* ProfilerService::RunUnary(grpc::CallbackServerContext* context,
                                                    std::string method,
                                                    std::function<absl::Status()> call) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // The reactor may be finished before this handler returns it: gRPC keeps the status until
  // the call is bound.
  pool_.Post([this, reactor, method = std::move(method), call = std::move(call)] {
    const grpc::Status status = ToGrpcStatus(call());
    if (observer_) observer_(method, status.error_code());
    reactor->Finish(status);
  });
  return reactor;
}

grpc::ServerWriteReactor<v1::ExperimentEvent>* ProfilerService::Submit(
    grpc::CallbackServerContext* context, const v1::ExperimentRequest* request) {
  const absl::Time entered = absl::Now();
  auto* reactor = new ExperimentStream(manager_, context, "Submit", streams_);
  // The form of every request is checked first: nothing below sees an oversized id or text.
  if (absl::Status form = CheckRequestForm(*request); !form.ok()) {
    reactor->FinishNow(ToGrpcStatus(form));
    return reactor;
  }
  auto caller = Identify(context);
  if (!caller.ok()) {
    reactor->FinishNow(ToGrpcStatus(caller.status()));
    return reactor;
  }
  Actor actor = ActorOf(*caller);
  if (actor.user.empty()) actor.user = request->user();
  pool_.Post([this, reactor, request, actor = std::move(actor), entered] {
    RecordSubmitPhase(SubmitPhase::kPoolWait, absl::Now() - entered);
    auto experiment = manager_->Submit(*request, actor);
    if (!experiment.ok()) {
      reactor->FinishNow(ToGrpcStatus(experiment.status()));
      return;
    }
    // The stream starts with the stored QUEUED event: the acknowledgement, after its commit.
    // It is always admitted (and counted against the submitter's stream caps).
    const absl::Time stored = absl::Now();
    reactor->Begin(experiment->id(), 1, Watcher{actor.user, actor.admin, /*own_submission=*/true});
    const absl::Time begun = absl::Now();
    RecordSubmitPhase(SubmitPhase::kStreamStart, begun - stored);
    RecordSubmitPhase(SubmitPhase::kTotal, begun - entered);
  });
  return reactor;
}

grpc::ServerWriteReactor<v1::ExperimentEvent>* ProfilerService::Watch(
    grpc::CallbackServerContext* context, const v1::WatchRequest* request) {
  auto* reactor = new ExperimentStream(manager_, context, "Watch", streams_);
  absl::Status status = CheckRequestForm(*request);
  auto caller = Identify(context);
  if (status.ok()) status = caller.status();
  if (!status.ok()) {
    reactor->FinishNow(ToGrpcStatus(status));
    return reactor;
  }
  // The replay reads the store. The stream counts against the caller's caps, and the owner
  // and admins have room kept for them.
  pool_.Post([reactor, request, watcher = WatcherOf(*caller)] {
    reactor->Begin(request->experiment_id(), request->from_seq(), watcher);
  });
  return reactor;
}

grpc::ServerUnaryReactor* ProfilerService::Cancel(grpc::CallbackServerContext* context,
                                                  const v1::CancelRequest* request,
                                                  v1::Experiment* response) {
  if (absl::Status form = CheckRequestForm(*request); !form.ok()) {
    return FinishUnary(context, "Cancel", form);
  }
  auto caller = Identify(context);
  if (!caller.ok()) return FinishUnary(context, "Cancel", caller.status());
  return RunUnary(context, "Cancel", [this, request, response, actor = ActorOf(*caller)] {
    auto experiment = manager_->Cancel(request->experiment_id(), request->reason(), actor);
    if (experiment.ok()) *response = *std::move(experiment);
    return experiment.status();
  });
}

grpc::ServerUnaryReactor* ProfilerService::GetExperiment(
    grpc::CallbackServerContext* context, const v1::GetExperimentRequest* request,
    v1::Experiment* response) {
  if (absl::Status form = CheckRequestForm(*request); !form.ok()) {
    return FinishUnary(context, "GetExperiment", form);
  }
  if (auto caller = Identify(context); !caller.ok()) {
    return FinishUnary(context, "GetExperiment", caller.status());
  }
  return RunUnary(context, "GetExperiment", [this, request, response] {
    auto experiment = manager_->Get(request->experiment_id());
    if (experiment.ok()) *response = *std::move(experiment);
    return experiment.status();
  });
}

grpc::ServerUnaryReactor* ProfilerService::GetCaptureReport(
    grpc::CallbackServerContext* context, const v1::GetCaptureReportRequest* request,
    v1::CaptureReportPage* response) {
  if (absl::Status form = CheckRequestForm(*request); !form.ok()) {
    return FinishUnary(context, "GetCaptureReport", form);
  }
  auto caller = Identify(context);
  if (!caller.ok()) return FinishUnary(context, "GetCaptureReport", caller.status());
  return RunUnary(context, "GetCaptureReport", [this, request, response, identity = *caller] {
    ASSIGN_OR_RETURN(const v1::Experiment experiment, manager_->Get(request->experiment_id()));
    RETURN_IF_ERROR(CheckMayReadCaptureReport(experiment, identity.user, identity.admin));
    ASSIGN_OR_RETURN(*response, ReadCaptureReportPage(manager_->capture_tools().reports_dir,
                                                      experiment, request->offset()));
    return absl::OkStatus();
  });
}

namespace {
// A listing's rows that do not parse, returned beside the ones that do.
template <typename Response>
void AddDamaged(const std::vector<store::DamagedRow>& rows, Response& response) {
  for (const store::DamagedRow& row : rows) {
    v1::DamagedRow& damaged = *response.add_damaged();
    damaged.set_table(row.table);
    damaged.set_id(row.id);
    damaged.set_error(row.error);
  }
}
}  // namespace

grpc::ServerUnaryReactor* ProfilerService::ListExperiments(
    grpc::CallbackServerContext* context, const v1::ListExperimentsRequest* request,
    v1::ListExperimentsResponse* response) {
  if (absl::Status form = CheckRequestForm(*request); !form.ok()) {
    return FinishUnary(context, "ListExperiments", form);
  }
  if (auto caller = Identify(context); !caller.ok()) {
    return FinishUnary(context, "ListExperiments", caller.status());
  }
  return RunUnary(context, "ListExperiments", [this, request, response] {
    ExperimentFilter filter;
    filter.user = request->user();
    for (int state : request->states()) filter.states.push_back(v1::ExperimentState(state));
    filter.workload = request->workload();
    auto page = manager_->List(filter, request->page_size(), request->page_token());
    if (page.ok()) {
      for (auto& experiment : page->experiments) {
        *response->add_experiments() = std::move(experiment);
      }
      response->set_next_page_token(page->next_page_token);
      AddDamaged(page->damaged, *response);
    }
    return page.status();
  });
}

grpc::ServerUnaryReactor* ProfilerService::ListGpus(grpc::CallbackServerContext* context,
                                                    const v1::ListGpusRequest* request,
                                                    v1::ListGpusResponse* response) {
  if (absl::Status form = CheckRequestForm(*request); !form.ok()) {
    return FinishUnary(context, "ListGpus", form);
  }
  if (auto caller = Identify(context); !caller.ok()) {
    return FinishUnary(context, "ListGpus", caller.status());
  }
  // Takes the manager's lock, which a store write may hold.
  return RunUnary(context, "ListGpus", [this, response] {
    *response = manager_->ListGpus();
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ProfilerService::SubmitSweep(grpc::CallbackServerContext* context,
                                                       const v1::SweepRequest* request,
                                                       v1::Sweep* response) {
  if (absl::Status form = CheckRequestForm(*request); !form.ok()) {
    return FinishUnary(context, "SubmitSweep", form);
  }
  auto caller = Identify(context);
  if (!caller.ok()) return FinishUnary(context, "SubmitSweep", caller.status());
  Actor actor = ActorOf(*caller);
  if (actor.user.empty()) actor.user = request->user();
  return RunUnary(context, "SubmitSweep", [this, request, response, actor = std::move(actor)] {
    auto sweep = sweeps_->Submit(*request, actor);
    if (sweep.ok()) *response = *std::move(sweep);
    return sweep.status();
  });
}

grpc::ServerWriteReactor<v1::SweepEvent>* ProfilerService::WatchSweep(
    grpc::CallbackServerContext* context, const v1::WatchSweepRequest* request) {
  auto* reactor =
      new EventStreamReactor<v1::SweepEvent, SweepManager>(sweeps_, context, "WatchSweep",
                                                               streams_);
  if (absl::Status form = CheckRequestForm(*request); !form.ok()) {
    reactor->FinishNow(ToGrpcStatus(form));
  } else if (auto caller = Identify(context); !caller.ok()) {
    reactor->FinishNow(ToGrpcStatus(caller.status()));
  } else {
    pool_.Post([reactor, request, watcher = WatcherOf(*caller)] {
      reactor->Begin(request->sweep_id(), request->from_seq(), watcher);
    });
  }
  return reactor;
}

grpc::ServerUnaryReactor* ProfilerService::GetSweep(grpc::CallbackServerContext* context,
                                                    const v1::GetSweepRequest* request,
                                                    v1::Sweep* response) {
  if (absl::Status form = CheckRequestForm(*request); !form.ok()) {
    return FinishUnary(context, "GetSweep", form);
  }
  if (auto caller = Identify(context); !caller.ok()) {
    return FinishUnary(context, "GetSweep", caller.status());
  }
  return RunUnary(context, "GetSweep", [this, request, response] {
    auto sweep = sweeps_->Get(request->sweep_id(), request->points_page_size(),
                              request->points_page_token());
    if (sweep.ok()) *response = *std::move(sweep);
    return sweep.status();
  });
}

grpc::ServerUnaryReactor* ProfilerService::ListSweeps(grpc::CallbackServerContext* context,
                                                      const v1::ListSweepsRequest* request,
                                                      v1::ListSweepsResponse* response) {
  if (absl::Status form = CheckRequestForm(*request); !form.ok()) {
    return FinishUnary(context, "ListSweeps", form);
  }
  if (auto caller = Identify(context); !caller.ok()) {
    return FinishUnary(context, "ListSweeps", caller.status());
  }
  return RunUnary(context, "ListSweeps", [this, request, response] {
    auto page = sweeps_->List(request->user(), request->page_size(), request->page_token());
    if (page.ok()) {
      for (auto& sweep : page->sweeps) *response->add_sweeps() = std::move(sweep);
      response->set_next_page_token(page->next_page_token);
      AddDamaged(page->damaged, *response);
    }
    return page.status();
  });
}

grpc::ServerUnaryReactor* ProfilerService::CancelSweep(grpc::CallbackServerContext* context,
                                                       const v1::CancelSweepRequest* request,
                                                       v1::Sweep* response) {
  if (absl::Status form = CheckRequestForm(*request); !form.ok()) {
    return FinishUnary(context, "CancelSweep", form);
  }
  auto caller = Identify(context);
  if (!caller.ok()) return FinishUnary(context, "CancelSweep", caller.status());
  return RunUnary(context, "CancelSweep", [this, request, response, actor = ActorOf(*caller)] {
    auto sweep = sweeps_->Cancel(request->sweep_id(), request->reason(), actor);
    if (sweep.ok()) *response = *std::move(sweep);
    return sweep.status();
  });
}

grpc::ServerUnaryReactor* ProfilerService::SaveBaseline(grpc::CallbackServerContext* context,
                                                        const v1::SaveBaselineRequest* request,
                                                        v1::Baseline* response) {
  if (absl::Status form = CheckRequestForm(*request); !form.ok()) {
    return FinishUnary(context, "SaveBaseline", form);
  }
  auto caller = Identify(context);
  if (!caller.ok()) return FinishUnary(context, "SaveBaseline", caller.status());
  // A baseline belongs to the authenticated caller, not to whom the request names
  // (request.user counts only for in-process callers, who have no identity).
  Actor actor = ActorOf(*caller);
  if (actor.user.empty()) actor.user = request->user();
  return RunUnary(context, "SaveBaseline", [this, request, response, actor = std::move(actor)] {
    auto baseline = sweeps_->SaveBaseline(*request, actor);
    if (baseline.ok()) *response = *std::move(baseline);
    return baseline.status();
  });
}

grpc::ServerUnaryReactor* ProfilerService::DeleteBaseline(grpc::CallbackServerContext* context,
                                                          const v1::DeleteBaselineRequest* request,
                                                          v1::Baseline* response) {
  if (absl::Status form = CheckRequestForm(*request); !form.ok()) {
    return FinishUnary(context, "DeleteBaseline", form);
  }
  auto caller = Identify(context);
  if (!caller.ok()) return FinishUnary(context, "DeleteBaseline", caller.status());
  return RunUnary(context, "DeleteBaseline", [this, request, response, actor = ActorOf(*caller)] {
    auto baseline = sweeps_->DeleteBaseline(request->name(), actor);
    if (baseline.ok()) *response = *std::move(baseline);
    return baseline.status();
  });
}

grpc::ServerUnaryReactor* ProfilerService::ListBaselines(
    grpc::CallbackServerContext* context, const v1::ListBaselinesRequest* request,
    v1::ListBaselinesResponse* response) {
  if (absl::Status form = CheckRequestForm(*request); !form.ok()) {
    return FinishUnary(context, "ListBaselines", form);
  }
  if (auto caller = Identify(context); !caller.ok()) {
    return FinishUnary(context, "ListBaselines", caller.status());
  }
  return RunUnary(context, "ListBaselines", [this, request, response] {
    auto baselines = sweeps_->ListBaselines(request->name());
    if (baselines.ok()) {
      for (auto& baseline : *baselines) *response->add_baselines() = std::move(baseline);
    }
    return baselines.status();
  });
}

grpc::ServerUnaryReactor* ProfilerService::WhoAmI(grpc::CallbackServerContext* context,
                                                  const v1::WhoAmIRequest* request,
                                                  v1::CallerInfo* response) {
  if (absl::Status form = CheckRequestForm(*request); !form.ok()) {
    return FinishUnary(context, "WhoAmI", form);
  }
  auto caller = Identify(context);
  if (caller.ok()) {
    response->set_user(caller->user);
    response->set_authenticated_by(caller->authenticated_by);
    response->set_admin(caller->admin);
    response->set_admin_reason(caller->admin_reason);
    for (const std::string& group : caller->groups) response->add_groups(group);
  }
  return FinishUnary(context, "WhoAmI", caller.status());
}

grpc::ServerUnaryReactor* ProfilerService::GetQuota(grpc::CallbackServerContext* context,
                                                    const v1::GetQuotaRequest* request,
                                                    v1::QuotaReport* response) {
  if (absl::Status form = CheckRequestForm(*request); !form.ok()) {
    return FinishUnary(context, "GetQuota", form);
  }
  auto caller = Identify(context);
  if (!caller.ok()) return FinishUnary(context, "GetQuota", caller.status());
  std::string user = request->user().empty() ? caller->user : request->user();
  bool admin = caller->admin;
  if (user != caller->user) {
    if (!caller->admin) {
      // Audited (the user asked about as the one acted for) and counted like every refusal;
      // on the pool, since the audit entry waits for the disk. The name is the caller's
      // text: bounded and escaped before it is stored.
      std::string asked = absl::CEscape(user.substr(0, 80));
      if (user.size() > 80) absl::StrAppend(&asked, "... (", user.size(), " bytes)");
      return RunUnary(context, "GetQuota", [this, actor = ActorOf(*caller), asked] {
        return manager_->admission().Refuse(
            actor, asked, "not-admin",
            absl::PermissionDeniedError(
                absl::StrCat("user: only admins may read another user's quota (GetQuota for ",
                             asked, "; you are ", actor.user, ", ", actor.authenticated_by, ")")));
      });
    }
    admin = authenticator_ != nullptr &&
            authenticator_->Describe(user, "", /*is_daemon_uid=*/false).admin;
  }
  return RunUnary(context, "GetQuota", [this, response, user = std::move(user), admin] {
    auto report = manager_->admission().QuotaOf(user, admin);
    if (report.ok()) *response = *std::move(report);
    return report.status();
  });
}

grpc::ServerUnaryReactor* ProfilerService::ListAudit(grpc::CallbackServerContext* context,
                                                     const v1::ListAuditRequest* request,
                                                     v1::ListAuditResponse* response) {
  if (absl::Status form = CheckRequestForm(*request); !form.ok()) {
    return FinishUnary(context, "ListAudit", form);
  }
  auto caller = Identify(context);
  if (!caller.ok()) return FinishUnary(context, "ListAudit", caller.status());
  if (!caller->admin) {
    // Audited and counted like every refusal; on the pool, since the entry waits for the disk.
    return RunUnary(context, "ListAudit", [this, actor = ActorOf(*caller)] {
      return manager_->admission().Refuse(actor, "", "not-admin",
                              absl::PermissionDeniedError(
                                  absl::StrCat("the audit trail is for admins (ListAudit; you are ",
                                               actor.user, ", ", actor.authenticated_by, ")")));
    });
  }
  return RunUnary(context, "ListAudit", [this, request, response] {
    auto entries = manager_->Audit(*request);
    if (entries.ok()) {
      for (auto& entry : *entries) *response->add_entries() = std::move(entry);
    }
    return entries.status();
  });
}

grpc::ServerUnaryReactor* ProfilerService::ClearGpuHealth(
    grpc::CallbackServerContext* context, const v1::ClearGpuHealthRequest* request,
    v1::GpuInfo* response) {
  if (absl::Status form = CheckRequestForm(*request); !form.ok()) {
    return FinishUnary(context, "ClearGpuHealth", form);
  }
  auto caller = Identify(context);
  if (!caller.ok()) return FinishUnary(context, "ClearGpuHealth", caller.status());
  // On the pool: the clear (or its refusal) waits for the disk and the manager's lock.
  return RunUnary(context, "ClearGpuHealth", [this, request, response, actor = ActorOf(*caller)] {
    auto gpu = manager_->ClearGpuHealth(request->gpu_index(), request->reason(), actor);
    if (gpu.ok()) *response = *std::move(gpu);
    return gpu.status();
  });
}

}  // namespace gpuprof::daemon
