#include "daemon/admission/admission.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/admission/live_counts.h"
#include "daemon/admission/quota.h"
#include "google/protobuf/util/time_util.h"
#include "workloads/spec_table.h"

namespace gpuprof::daemon {
namespace {

using ::google::protobuf::util::TimeUtil;

// "point 3 (tokens=64, dtype=bf16): " or "point 3: " before a sweep point's error; "" for a
// single experiment.
std::string PointPrefix(const AdmissionRequest& submission, size_t index, bool parameters) {
  if (!submission.sweep) return "";
  if (parameters && index < submission.point_parameters.size()) {
    return absl::StrCat("point ", index, " (", submission.point_parameters[index], "): ");
  }
  return absl::StrCat("point ", index, ": ");
}

absl::Status Prefixed(const absl::Status& status, const std::string& prefix) {
  if (status.ok() || prefix.empty()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

}  // namespace

AdmissionLedger::AdmissionLedger(int submits_per_minute)
    : submits_per_minute_(submits_per_minute) {}

AdmissionLedger::Bucket& AdmissionLedger::RefilledBucket(const std::string& user, absl::Time now) {
  const double capacity = submits_per_minute_;
  auto [bucket, fresh] = buckets_.try_emplace(user);
  if (fresh) {
    bucket->second.tokens = capacity;
  } else if (now > bucket->second.refilled) {
    bucket->second.tokens =
        std::min(capacity, bucket->second.tokens +
                               absl::ToDoubleMinutes(now - bucket->second.refilled) * capacity);
  }
  bucket->second.refilled = std::max(bucket->second.refilled, now);
  return bucket->second;
}

absl::Status AdmissionLedger::CheckRate(const std::string& user, absl::Time now) {
  if (submits_per_minute_ <= 0) return absl::OkStatus();
  const Bucket& bucket = RefilledBucket(user, now);
  if (bucket.tokens >= 1) return absl::OkStatus();
  const absl::Duration wait = absl::Minutes((1 - bucket.tokens) / submits_per_minute_);
  return absl::ResourceExhaustedError(
      absl::StrCat("submit rate limit for ", user, " is ", submits_per_minute_,
                   " per minute (--submits_per_minute_per_user); retry in ",
                   absl::FormatDuration(absl::Ceil(wait, absl::Milliseconds(100)))));
}

void AdmissionLedger::TakeToken(const std::string& user, absl::Time now) {
  if (submits_per_minute_ <= 0) return;
  RefilledBucket(user, now).tokens -= 1;
}

void AdmissionLedger::RefundToken(const std::string& user) {
  if (submits_per_minute_ <= 0) return;
  const auto bucket = buckets_.find(user);
  if (bucket == buckets_.end()) return;
  bucket->second.tokens = std::min<double>(submits_per_minute_, bucket->second.tokens + 1);
}

int AdmissionLedger::reserved(const std::string& user) const {
  return LiveCountOf(reserved_, user);
}

void AdmissionLedger::Reserve(const std::string& user, int places) {
  if (places > 0) reserved_[user] += places;
}

void AdmissionLedger::Release(const std::string& user, int places) {
  if (places > 0) DecrementLiveCount(reserved_, user, places);
}

Admission& Admission::operator=(Admission&& other) noexcept {
  if (this != &other) {
    GiveBack();
    control_ = std::exchange(other.control_, nullptr);
    actor_ = std::move(other.actor_);
    user_ = std::move(other.user_);
    requests_ = std::move(other.requests_);
    places_ = std::exchange(other.places_, 0);
    token_of_ = std::move(other.token_of_);
    other.token_of_.clear();
  }
  return *this;
}

Admission::~Admission() { GiveBack(); }

void Admission::GiveBack() {
  if (control_ != nullptr && (places_ > 0 || !token_of_.empty())) control_->GiveBack(*this);
  control_ = nullptr;
}

AdmissionControl::AdmissionControl(AdmissionOptions options, const v1::ListGpusResponse& inventory,
                                   ExperimentStore& store)
    : options_(std::move(options)),
      inventory_(inventory),
      store_(store),
      ledger_(options_.submits_per_minute_per_user) {}

absl::StatusOr<Admission> AdmissionControl::Admit(AdmissionRequest submission) {
  const Actor& actor = submission.actor;
  if (submission.user.empty()) submission.user = actor.user;
  const std::string& user = submission.user;
  // Identity: only admins act for others.
  if (user != actor.user && !actor.admin) {
    return Refuse(actor, user, "on-behalf-of",
                  absl::PermissionDeniedError(
                      absl::StrCat("user: you are ", actor.user, " (", actor.authenticated_by,
                                   "); only admins may submit ", submission.sweep ? "a sweep " : "",
                                   "on behalf of another user (asked for ", user, ")")));
  }
  // Policy: who may run their own kernel on the box (before its source is even checked).
  RETURN_IF_ERROR(CheckCustomKernelPolicy(submission));
  RETURN_IF_ERROR(CheckCapturePolicy(submission));
  // Policy: admins have no quota.
  std::optional<ResolvedQuota> quota;
  if (!actor.admin && options_.access != nullptr) quota = options_.access->QuotaForUser(user);
  for (v1::ExperimentRequest& request : submission.requests) {
    if (request.user().empty()) request.set_user(user);
    if (quota.has_value()) ApplyQuotaTimeout(*quota, options_.limits.default_timeout, request);
  }
  // Validation: what is checked from here on is what will be stored.
  RETURN_IF_ERROR(Validate(submission));
  std::string reason;
  absl::StatusOr<Admission> admission = CheckAndTake(submission, quota, reason);
  if (admission.ok() || reason.empty()) return admission;
  // Audited without the lock: the audit entry is a durable write.
  const std::string on_behalf_of = reason != "submit-rate" && user != actor.user ? user : "";
  return Refuse(actor, on_behalf_of, reason, admission.status());
}

absl::Status AdmissionControl::CheckCustomKernelPolicy(const AdmissionRequest& submission) {
  const Actor& actor = submission.actor;
  const auto custom = std::find_if(
      submission.requests.begin(), submission.requests.end(),
      [](const v1::ExperimentRequest& request) { return request.has_custom_kernel(); });
  if (custom == submission.requests.end() || actor.admin || options_.access == nullptr) {
    return absl::OkStatus();
  }
  // Asked of the actor, who sent the source (only an admin acts for another user).
  if (options_.access->CustomKernelsFor(actor.user, actor.admin).allowed) {
    return absl::OkStatus();
  }
  const std::string prefix = PointPrefix(
      submission, static_cast<size_t>(custom - submission.requests.begin()), /*parameters=*/true);
  return Refuse(
      actor, "", "custom-kernel",
      absl::PermissionDeniedError(absl::StrCat(
          prefix, "custom_kernel: ", actor.user, " (", actor.authenticated_by,
          ") may not submit custom kernels on this daemon; the access policy's "
          "custom_kernel_users, custom_kernel_groups or custom_kernels_for_everyone say who may "
          "(ask an admin)")));
}

absl::Status AdmissionControl::CheckCapturePolicy(const AdmissionRequest& submission) {
  const Actor& actor = submission.actor;
  const auto capture = std::find_if(
      submission.requests.begin(), submission.requests.end(),
      [](const v1::ExperimentRequest& request) {
        return request.capture().tool() != v1::NsightCapture::TOOL_UNSPECIFIED;
      });
  if (capture == submission.requests.end() || actor.admin || options_.access == nullptr) {
    return absl::OkStatus();
  }
  if (options_.access->CapturesFor(actor.user, actor.admin).allowed) return absl::OkStatus();
  const std::string prefix = PointPrefix(
      submission, static_cast<size_t>(capture - submission.requests.begin()), /*parameters=*/true);
  return Refuse(actor, "", "capture",
                absl::PermissionDeniedError(absl::StrCat(
                    prefix, "capture: ", actor.user, " (", actor.authenticated_by,
                    ") may not have experiments run under Nsight tools on this daemon; the "
                    "access policy's capture_users, capture_groups or captures_for_everyone say "
                    "who may (ask an admin)")));
}

absl::Status AdmissionControl::Validate(AdmissionRequest& submission) const {
  for (size_t index = 0; index < submission.requests.size(); ++index) {
    v1::ExperimentRequest& request = submission.requests[index];
    RETURN_IF_ERROR(Prefixed(ApplyDefaultsAndValidate(options_.limits, inventory_, request),
                             PointPrefix(submission, index, /*parameters=*/true)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Admission> AdmissionControl::CheckAndTake(AdmissionRequest& submission,
                                                         const std::optional<ResolvedQuota>& quota,
                                                         std::string& reason) {
  const Actor& actor = submission.actor;
  const std::string& user = submission.user;
  const int adding = static_cast<int>(submission.requests.size());
  const bool rate_limited = !actor.admin && options_.submits_per_minute_per_user > 0;
  absl::MutexLock lock(&mutex_);
  const absl::Time now = absl::Now();
  // Everything is checked before anything is taken: a refusal changes nothing.
  if (rate_limited) {
    const absl::Status refusal = ledger_.CheckRate(actor.user, now);
    if (!refusal.ok()) {
      reason = "submit-rate";
      return refusal;
    }
  }
  if (quota.has_value()) {
    absl::Status refusal;
    bool needs_gpus = false;
    for (size_t index = 0; index < submission.requests.size() && refusal.ok(); ++index) {
      const v1::ExperimentRequest& request = submission.requests[index];
      needs_gpus = needs_gpus || workloads::RequiredGpuCount(request) > 0;
      refusal = Prefixed(CheckRequestQuota(request, user, *quota),
                         PointPrefix(submission, index, /*parameters=*/false));
    }
    if (refusal.ok() && quota->limits.has_max_queued_experiments()) {
      const std::map<std::string, UserUse> use =
          options_.use_by_user ? options_.use_by_user() : std::map<std::string, UserUse>();
      const auto mine = use.find(user);
      // Admitted requests still being stored count as queued: they will be.
      refusal = CheckQueuedQuota(user, *quota, mine == use.end() ? 0 : mine->second.queued,
                                 ledger_.reserved(user), adding);
    }
    if (refusal.ok() && quota->limits.has_max_gpu_hours_per_day() && needs_gpus) {
      const absl::StatusOr<double> used = GpuHoursLastDay(user, now);
      refusal = used.ok() ? CheckGpuHoursQuota(user, *quota, *used) : used.status();
    }
    if (!refusal.ok()) {
      reason = QuotaReason(refusal);
      return refusal;
    }
  }
  // ...and taken in the same critical section as the check.
  Admission admission;
  admission.control_ = this;
  admission.actor_ = actor;
  admission.user_ = user;
  admission.requests_ = std::move(submission.requests);
  admission.places_ = adding;
  ledger_.Reserve(user, adding);
  if (rate_limited) {
    ledger_.TakeToken(actor.user, now);
    admission.token_of_ = actor.user;
  }
  return admission;
}

void AdmissionControl::Settle(Admission& admission, absl::FunctionRef<void()> queue) {
  absl::MutexLock lock(&mutex_);
  queue();
  ledger_.Release(admission.user_, admission.places_);
  admission.places_ = 0;
  // The token was spent on a submission that is now stored.
  admission.token_of_.clear();
}

void AdmissionControl::GiveBack(Admission& admission) {
  absl::MutexLock lock(&mutex_);
  ledger_.Release(admission.user_, admission.places_);
  if (!admission.token_of_.empty()) ledger_.RefundToken(admission.token_of_);
  admission.places_ = 0;
  admission.token_of_.clear();
}

absl::Status AdmissionControl::Refuse(const Actor& actor, const std::string& on_behalf_of,
                                      const std::string& reason, absl::Status status) {
  if (options_.refused) options_.refused(reason);
  v1::AuditEntry entry;
  entry.set_actor(actor.user);
  entry.set_on_behalf_of(on_behalf_of);
  entry.set_action("refuse");
  entry.set_detail(absl::StrCat(reason, ": ", status.message()));
  entry.set_authenticated_by(actor.authenticated_by);
  RecordAudit(std::move(entry));
  return status;
}

void AdmissionControl::RecordAudit(v1::AuditEntry entry) {
  if (!entry.has_time()) {
    *entry.mutable_time() = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(absl::Now()));
  }
  const absl::Status stored = store_.AppendAudit(entry);
  if (!stored.ok()) {
    std::fprintf(stderr, "gpuprofd: could not record an audit entry: %s\n",
                 stored.ToString().c_str());
  }
}

absl::StatusOr<double> AdmissionControl::GpuHoursLastDay(const std::string& user, absl::Time now) {
  const absl::Time since = now - absl::Hours(24);
  // An experiment created before the window can still have run inside it, for at most its
  // timeout after it started; the queue wait before that is not bounded, so look back far.
  const absl::Time created_after = since - options_.limits.max_timeout - absl::Hours(24 * 7);
  ASSIGN_OR_RETURN(std::vector<v1::Experiment> experiments,
                   store_.ListUserCreatedSince(user, absl::ToUnixNanos(created_after)));
  return GpuHoursBetween(experiments, since, now);
}

absl::StatusOr<v1::QuotaReport> AdmissionControl::QuotaOf(const std::string& user, bool admin) {
  v1::QuotaReport report;
  report.set_user(user);
  report.set_admin(admin);
  if (options_.access != nullptr) {
    const ResolvedQuota quota = options_.access->QuotaForUser(user);
    *report.mutable_limits() = quota.limits;
    report.set_source(admin ? "admin: no limits apply" : quota.source);
  }
  ASSIGN_OR_RETURN(double hours, GpuHoursLastDay(user, absl::Now()));
  report.set_gpu_hours_last_day(hours);
  if (options_.use_by_user) {
    const std::map<std::string, UserUse> use = options_.use_by_user();
    if (const auto mine = use.find(user); mine != use.end()) {
      report.set_queued_experiments(mine->second.queued);
      report.set_running_gpus(mine->second.running_gpus);
    }
  }
  return report;
}

std::vector<v1::QuotaReport> AdmissionControl::QuotaUseForMetrics() {
  std::vector<v1::QuotaReport> reports;
  if (options_.access == nullptr) return reports;
  std::set<std::string> named;
  for (const v1::UserQuota& entry : options_.access->policy()->users()) {
    if (!named.insert(entry.user()).second) continue;
    auto report = QuotaOf(entry.user(), /*admin=*/false);
    if (report.ok()) reports.push_back(*std::move(report));
  }
  v1::QuotaReport other;
  other.set_user(kOtherUsers);
  if (options_.use_by_user) {
    for (const auto& [user, use] : options_.use_by_user()) {
      if (named.contains(user)) continue;
      other.set_queued_experiments(other.queued_experiments() + use.queued);
      other.set_running_gpus(other.running_gpus() + use.running_gpus);
    }
  }
  reports.push_back(std::move(other));
  return reports;
}

}  // namespace gpuprof::daemon
