#include "daemon/admission/quota.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/util/time_util.h"
#include "workloads/spec_table.h"

namespace gpuprof::daemon {
namespace {

using ::google::protobuf::util::TimeUtil;

// " for alice (users entry)": whose quota, and where the policy set it.
std::string Whose(const std::string& user, const ResolvedQuota& quota) {
  return absl::StrCat(" for ", user, " (", quota.source, ")");
}

absl::Time TimeOf(const google::protobuf::Timestamp& timestamp) {
  return absl::FromUnixNanos(TimeUtil::TimestampToNanoseconds(timestamp));
}

}  // namespace

void ApplyQuotaTimeout(const ResolvedQuota& quota, absl::Duration default_timeout,
                       v1::ExperimentRequest& request) {
  if (!request.has_timeout() && quota.limits.has_max_timeout() &&
      TimeUtil::DurationToNanoseconds(quota.limits.max_timeout()) <
          absl::ToInt64Nanoseconds(default_timeout)) {
    *request.mutable_timeout() = quota.limits.max_timeout();
  }
}

absl::Status CheckRequestQuota(const v1::ExperimentRequest& request, const std::string& user,
                               const ResolvedQuota& quota) {
  const v1::Quota& limits = quota.limits;
  if (limits.has_max_priority() && request.priority() > limits.max_priority()) {
    return absl::PermissionDeniedError(absl::StrCat("quota max_priority", Whose(user, quota),
                                                    " is ", limits.max_priority(),
                                                    "; the request asks for ", request.priority()));
  }
  if (limits.has_max_timeout()) {
    const int64_t allowed = TimeUtil::DurationToNanoseconds(limits.max_timeout());
    const int64_t asked = TimeUtil::DurationToNanoseconds(request.timeout());
    if (asked > allowed) {
      return absl::PermissionDeniedError(
          absl::StrCat("quota max_timeout", Whose(user, quota), " is ",
                       absl::FormatDuration(absl::Nanoseconds(allowed)), "; the request asks for ",
                       absl::FormatDuration(absl::Nanoseconds(asked))));
    }
  }
  const int gpus = workloads::RequiredGpuCount(request);
  if (limits.has_max_concurrent_gpus() && gpus > limits.max_concurrent_gpus()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "quota max_concurrent_gpus", Whose(user, quota), " is ", limits.max_concurrent_gpus(),
        "; the request needs ", gpus, " GPU(s) at once and could never run"));
  }
  return absl::OkStatus();
}

absl::Status CheckQueuedQuota(const std::string& user, const ResolvedQuota& quota, int queued,
                              int being_stored, int adding) {
  const v1::Quota& limits = quota.limits;
  if (!limits.has_max_queued_experiments() ||
      queued + being_stored + adding <= limits.max_queued_experiments()) {
    return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "quota max_queued_experiments", Whose(user, quota), " is ", limits.max_queued_experiments(),
      "; in use: ", queued + being_stored, " queued experiment(s)",
      being_stored > 0 ? absl::StrCat(" (", being_stored, " of them being stored)") : "",
      adding > 1 ? absl::StrCat("; the sweep would add ", adding, " points") : ""));
}

absl::Status CheckGpuHoursQuota(const std::string& user, const ResolvedQuota& quota, double used) {
  const v1::Quota& limits = quota.limits;
  if (!limits.has_max_gpu_hours_per_day() || used < limits.max_gpu_hours_per_day()) {
    return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "quota max_gpu_hours_per_day", Whose(user, quota), " is ", limits.max_gpu_hours_per_day(),
      "; in use: ", absl::StrFormat("%.3f", used), " GPU-hours over the last 24 hours"));
}

std::string QuotaReason(const absl::Status& refusal) {
  const absl::string_view message = refusal.message();
  const size_t start = message.find("quota ");
  if (start == absl::string_view::npos) return "quota";
  const size_t end = message.find(' ', start + 6);
  return absl::StrCat("quota:", message.substr(start + 6, end - start - 6));
}

double GpuHoursBetween(const std::vector<v1::Experiment>& experiments, absl::Time since,
                       absl::Time now) {
  double hours = 0;
  for (const v1::Experiment& experiment : experiments) {
    if (!experiment.has_started() || experiment.gpu_ids_size() == 0) continue;
    const absl::Time finished = experiment.has_finished() ? TimeOf(experiment.finished()) : now;
    const absl::Time from = std::max(TimeOf(experiment.started()), since);
    const absl::Time to = std::min(finished, now);
    if (to > from) hours += experiment.gpu_ids_size() * absl::ToDoubleHours(to - from);
  }
  return hours;
}

}  // namespace gpuprof::daemon
