// The policy's quotas applied to requests: the limits one request must fit (priority, timeout,
// GPUs), the use a user may not exceed (queued experiments, GPU-hours a day), and the reason
// a refusal is counted and audited under. Pure functions: the use they are given is counted by
// the caller, under the lock that makes the check and the taking of places one step.
#ifndef GPUPROF_DAEMON_ADMISSION_QUOTA_H_
#define GPUPROF_DAEMON_ADMISSION_QUOTA_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/admission/access_policy.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::daemon {

// A request without a timeout gets `default_timeout` (the daemon's), capped by the quota's
// max_timeout.
void ApplyQuotaTimeout(const ResolvedQuota& quota, absl::Duration default_timeout,
                       v1::ExperimentRequest& request);

// PERMISSION_DENIED naming the quota a single request exceeds (max_priority, max_timeout,
// max_concurrent_gpus), its value and what the request asks for. `request` has its defaults.
absl::Status CheckRequestQuota(const v1::ExperimentRequest& request, const std::string& user,
                               const ResolvedQuota& quota);

// RESOURCE_EXHAUSTED naming max_queued_experiments when `queued` experiments, `being_stored`
// places admitted and not yet queued, and `adding` more would exceed it.
absl::Status CheckQueuedQuota(const std::string& user, const ResolvedQuota& quota, int queued,
                              int being_stored, int adding);

// RESOURCE_EXHAUSTED naming max_gpu_hours_per_day when `used` GPU-hours (the last 24 hours)
// reach it.
absl::Status CheckGpuHoursQuota(const std::string& user, const ResolvedQuota& quota, double used);

// "quota:max_priority" and so on (from "quota max_priority for ..." or "point 3: quota ..."),
// for the refusal metric and the audit trail.
std::string QuotaReason(const absl::Status& refusal);

// GPU-hours `experiments` used between `since` and `now`: each one's GPUs times the part of
// its run inside the window (a running one up to `now`).
double GpuHoursBetween(const std::vector<v1::Experiment>& experiments, absl::Time since,
                       absl::Time now);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_ADMISSION_QUOTA_H_
