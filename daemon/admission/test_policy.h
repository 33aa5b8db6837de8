// What tests of admission and the managers set up: a directory of their own and a policy.
#ifndef GPUPROF_DAEMON_ADMISSION_TEST_POLICY_H_
#define GPUPROF_DAEMON_ADMISSION_TEST_POLICY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/admission/access_policy.h"

namespace gpuprof::daemon {

// A new directory under the test's temporary directory ($TEST_TMPDIR); "" if none was made.
std::string NewTestDir(absl::string_view prefix);

// The policy of `users` entries (text), written as dir/policy.textproto inside a whole policy
// in which the daemon's own user is no admin, and loaded.
absl::StatusOr<std::unique_ptr<AccessControl>> WriteTestPolicy(const std::string& dir,
                                                               absl::string_view users);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_ADMISSION_TEST_POLICY_H_
