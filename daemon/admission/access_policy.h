// The access policy (proto gpuprof.v1.AccessPolicy, a textproto file): parsing with errors that
// name the line and field, validation, and the decisions the daemon takes from it (who is an
// admin, which quota applies, whose token this is). AccessControl holds the policy in force and
// replaces it on reload only when the new file is valid.
#ifndef GPUPROF_DAEMON_ADMISSION_ACCESS_POLICY_H_
#define GPUPROF_DAEMON_ADMISSION_ACCESS_POLICY_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "gpuprof/v1/access.pb.h"

namespace gpuprof::daemon {

// The policy format this daemon reads (AccessPolicy.policy_version).
inline constexpr int kSupportedPolicyVersion = 1;

// The name under which users without a `users` entry are summed (the metrics' user label).
// No user can have it: a policy user name never contains parentheses.
inline constexpr char kOtherUsers[] = "(other)";

// Parses policy text; errors carry "<origin>:line:column: ..." as the parser reports them
// (an unknown field is named), then validation errors name the field path. The text must be a
// whole policy: `policy_version` its first field and `end_of_policy: true` its last, so that an
// empty file or one cut short is refused rather than read as a policy without its limits.
absl::StatusOr<v1::AccessPolicy> ParseAccessPolicy(const std::string& text,
                                                   const std::string& origin);
absl::StatusOr<v1::AccessPolicy> LoadAccessPolicyFile(const std::string& path);
// Every problem in one error: "users[1].quota.max_queued_experiments: got -1; must be >= 0".
// Includes the header and end marker (present, supported, true); where they stand in the text
// is ParseAccessPolicy's to check.
absl::Status ValidateAccessPolicy(const v1::AccessPolicy& policy);

// Lower-case hex SHA-256, how tokens are stored.
std::string Sha256Hex(absl::string_view data);

// The Unix groups `user` belongs to (primary and supplementary), by name; empty when the host
// does not know the user (a certificate name need not be a local account).
std::vector<std::string> UnixGroupsOf(const std::string& user);

struct AdminDecision {
  bool admin = false;
  std::string reason;  // "listed in admins", "member of group wheel", "runs gpuprofd"
};

struct ResolvedQuota {
  v1::Quota limits;
  std::string source;  // "default_quota", "users entry", "group gpu-team"
};

// Whether a user may submit custom kernels, and why ("admin", "listed in custom_kernel_users",
// "member of group gpu-devs", "custom_kernels_for_everyone"); `reason` is empty when not.
struct CustomKernelDecision {
  bool allowed = false;
  std::string reason;
};

// Decisions for one policy.
CustomKernelDecision DecideCustomKernels(const v1::AccessPolicy& policy, const std::string& user,
                                         const std::vector<std::string>& groups, bool admin);
// The same question for captures under an Nsight tool (capture_users, capture_groups,
// captures_for_everyone).
CustomKernelDecision DecideCaptures(const v1::AccessPolicy& policy, const std::string& user,
                                    const std::vector<std::string>& groups, bool admin);
AdminDecision DecideAdmin(const v1::AccessPolicy& policy, const std::string& user,
                          const std::vector<std::string>& groups, bool is_daemon_uid);
ResolvedQuota ResolveQuota(const v1::AccessPolicy& policy, const std::string& user,
                           const std::vector<std::string>& groups);

// Thread-safe holder of the policy in force.
class AccessControl {
 public:
  // `path` empty: the built-in policy (no quotas, the daemon's user is the only admin).
  static absl::StatusOr<std::unique_ptr<AccessControl>> Create(std::string path);

  // Reads the file again. On any error the policy in force stays and the error is returned.
  absl::Status Reload();
  std::shared_ptr<const v1::AccessPolicy> policy() const;
  const std::string& path() const { return path_; }

  AdminDecision IsAdmin(const std::string& user, const std::vector<std::string>& groups,
                        bool is_daemon_uid) const;
  ResolvedQuota QuotaFor(const std::string& user, const std::vector<std::string>& groups) const;
  // Looks the user's groups up only when the policy has group quotas.
  ResolvedQuota QuotaForUser(const std::string& user) const;
  // DecideCustomKernels for the policy in force; looks the user's groups up only when the
  // policy names custom_kernel_groups.
  CustomKernelDecision CustomKernelsFor(const std::string& user, bool admin) const;
  // DecideCaptures for the policy in force.
  CustomKernelDecision CapturesFor(const std::string& user, bool admin) const;
  // The user a bearer token belongs to, if any.
  std::optional<std::string> UserForToken(absl::string_view token) const;
  // Whether a TLS certificate's subject names the local account of the same name (policy
  // field tls_subjects_are_local_users); false: certificate users are "tls:<subject>". Reads
  // the policy in force, so a reload changes the answer for the next caller.
  bool TlsSubjectsAreLocalUsers() const;

 private:
  AccessControl(std::string path, v1::AccessPolicy policy);

  const std::string path_;
  mutable absl::Mutex mutex_;
  std::shared_ptr<const v1::AccessPolicy> policy_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_ADMISSION_ACCESS_POLICY_H_
