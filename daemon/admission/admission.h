// Admission: the one step every submission takes before anything of it is stored, for a single
// experiment and a sweep's points alike:
//   identity (who may submit for whom) -> policy (who may run custom kernels; the quota that
//   applies, its timeout cap)
//   -> validation (defaults, then the request as it will be stored)
//   -> quotas (rate, per-request limits, queued experiments, GPU-hours)
//   -> reservations (the queue places and the submit token), taken in the critical section
//      that checked them, so that parallel requests cannot all pass a check only some fit.
// A refusal by identity, rate or quota takes nothing, is counted and audited. What admission
// took is held by an Admission until the experiments are queued (Settle) or given back.
#ifndef GPUPROF_DAEMON_ADMISSION_ADMISSION_H_
#define GPUPROF_DAEMON_ADMISSION_ADMISSION_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/admission/access_policy.h"
#include "daemon/admission/request_validation.h"
#include "daemon/store/experiment_store.h"
#include "gpuprof/v1/access.pb.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/gpus.pb.h"

namespace gpuprof::daemon {

// Who asks, as the gRPC layer authenticated them.
struct Actor {
  std::string user;
  std::string authenticated_by;
  bool admin = false;
};

// Each user's submit tokens and queue places reserved for them. Not thread-safe: the
// AdmissionControl's lock guards it.
class AdmissionLedger {
 public:
  // Each user's bucket holds `submits_per_minute` tokens and refills at that rate (0: no
  // rate limit).
  explicit AdmissionLedger(int submits_per_minute);

  // RESOURCE_EXHAUSTED naming --submits_per_minute_per_user and the wait when `user` has no
  // token at `now`. Takes nothing.
  absl::Status CheckRate(const std::string& user, absl::Time now);
  // Takes one of `user`'s tokens (CheckRate said there is one).
  void TakeToken(const std::string& user, absl::Time now);
  // Gives a token taken for a request that was never stored back.
  void RefundToken(const std::string& user);

  // Queue places held for `user`'s requests between admission and their queueing.
  int reserved(const std::string& user) const;
  void Reserve(const std::string& user, int places);
  void Release(const std::string& user, int places);

 private:
  struct Bucket {
    double tokens = 0;
    absl::Time refilled;
  };
  // The bucket as it is at `now` (refilled), created full.
  Bucket& RefilledBucket(const std::string& user, absl::Time now);

  const int submits_per_minute_;
  std::map<std::string, Bucket> buckets_;
  std::map<std::string, int> reserved_;
};

// One submission: a single experiment, or every point of a sweep.
struct AdmissionRequest {
  Actor actor;
  // Whose experiments they will be; empty: the actor's.
  std::string user;
  std::vector<v1::ExperimentRequest> requests;
  // A sweep: each point's parameters as messages show them ("tokens=64, dtype=bf16"), one per
  // request; a refusal names the point. Empty for a single experiment.
  bool sweep = false;
  std::vector<std::string> point_parameters;
};

class AdmissionControl;

// What admission took for one submission, and the requests as admitted (defaults applied,
// validated): `places()` queue places of user()'s quota and, unless the actor is exempt, a
// submit token of the actor's. Held until the experiments are queued (AdmissionControl::
// Settle); whatever was not used is given back when it is destroyed (a submission that was
// never stored).
class Admission {
 public:
  Admission() = default;
  Admission(Admission&& other) noexcept { *this = std::move(other); }
  Admission& operator=(Admission&& other) noexcept;
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;
  ~Admission();

  const Actor& actor() const { return actor_; }
  const std::string& user() const { return user_; }
  // Whether the actor submits for another user (an admin: the experiments record both).
  bool on_behalf() const { return user_ != actor_.user; }
  std::vector<v1::ExperimentRequest>& requests() { return requests_; }
  int places() const { return places_; }

 private:
  friend class AdmissionControl;
  void GiveBack();

  AdmissionControl* control_ = nullptr;
  Actor actor_;
  std::string user_;
  std::vector<v1::ExperimentRequest> requests_;
  int places_ = 0;
  // The actor whose submit token was taken; empty if none.
  std::string token_of_;
};

// A user's experiments now: queued, and the GPUs of those running.
struct UserUse {
  int queued = 0;
  int running_gpus = 0;
};

struct AdmissionOptions {
  ValidationLimits limits;
  // Quotas come from here; null means none (in-process tests).
  const AccessControl* access = nullptr;
  // Submits one (non-admin) user may make per minute, as a token bucket holding this many
  // (0: no limit).
  int submits_per_minute_per_user = 0;
  // Each user's experiments as the daemon holds them now (the queue and what runs). Called
  // with the AdmissionControl's lock held: it may take the caller's own lock, which must never
  // be held while calling into AdmissionControl.
  std::function<std::map<std::string, UserUse>()> use_by_user;
  // Hears every refusal's reason ("quota:max_queued_experiments", "not-owner", ...).
  std::function<void(const std::string& reason)> refused;
};

// Thread-safe. Lock order: this lock, then the lock use_by_user and Settle's `queue` take.
class AdmissionControl {
 public:
  // `inventory` (the host's GPUs, which validation checks requests against) and `store` (the
  // audit trail, and the experiments GPU-hours are counted from) outlive this.
  AdmissionControl(AdmissionOptions options, const v1::ListGpusResponse& inventory,
                   ExperimentStore& store);

  // The one admission step (see the top of this file). On success the Admission holds the
  // requests as they are to be stored and the places and token taken for them.
  absl::StatusOr<Admission> Admit(AdmissionRequest submission) ABSL_LOCKS_EXCLUDED(mutex_);
  // The experiments of `admission` are stored: `queue` puts them in the queue, in the same
  // critical section that turns their places into queued experiments, so the quota check never
  // counts them twice or not at all. The token stays spent.
  void Settle(Admission& admission, absl::FunctionRef<void()> queue) ABSL_LOCKS_EXCLUDED(mutex_);

  // PERMISSION_DENIED or RESOURCE_EXHAUSTED `status`, recorded as a refusal (counted, audited).
  absl::Status Refuse(const Actor& actor, const std::string& on_behalf_of,
                      const std::string& reason, absl::Status status);
  // Records an entry (time filled in); failures are logged, not returned.
  void RecordAudit(v1::AuditEntry entry);

  // The user's limits (from the policy) and use now.
  absl::StatusOr<v1::QuotaReport> QuotaOf(const std::string& user, bool admin);
  // Use by each user with a `users` entry in the policy, then everyone else as kOtherUsers.
  std::vector<v1::QuotaReport> QuotaUseForMetrics();

 private:
  friend class Admission;
  // Gives back what an admission still holds (Admission's destructor).
  void GiveBack(Admission& admission) ABSL_LOCKS_EXCLUDED(mutex_);
  // PERMISSION_DENIED (refused: counted, audited) when a request carries a custom kernel and
  // the policy does not let the actor submit one.
  absl::Status CheckCustomKernelPolicy(const AdmissionRequest& submission);
  // Policy: who may have an experiment run under an Nsight tool (capture_users, ...).
  absl::Status CheckCapturePolicy(const AdmissionRequest& submission);
  // Defaults, then validation, of every request; a sweep's error names the point.
  absl::Status Validate(AdmissionRequest& submission) const;
  // Rate and quotas, checked before anything is taken; then the token and the places. A
  // refusal sets `reason` and takes nothing.
  absl::StatusOr<Admission> CheckAndTake(AdmissionRequest& submission,
                                         const std::optional<ResolvedQuota>& quota,
                                         std::string& reason) ABSL_LOCKS_EXCLUDED(mutex_);
  // GPU-hours `user`'s experiments used over the 24 hours before `now`.
  absl::StatusOr<double> GpuHoursLastDay(const std::string& user, absl::Time now);

  const AdmissionOptions options_;
  const v1::ListGpusResponse& inventory_;
  ExperimentStore& store_;
  absl::Mutex mutex_;
  AdmissionLedger ledger_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_ADMISSION_ADMISSION_H_
