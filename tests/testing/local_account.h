// A second local account for adversarial tests: the attacker (or the victim) is another uid on
// the same machine, as on a shared box. The account is made with useradd when absent, which
// needs root; binaries that account runs are copied where it can read them (Bazel's output
// tree sits under the test user's home, which other accounts cannot enter).
#ifndef GPUPROF_TESTS_TESTING_LOCAL_ACCOUNT_H_
#define GPUPROF_TESTS_TESTING_LOCAL_ACCOUNT_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {

struct LocalAccount {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  // A private, writable home for the account (HOME when it runs commands).
  std::string home;
};

// The account `name`, created (system account, no login shell) if it does not exist. Fails with
// the reason when it cannot be made (not root, no useradd): tests then skip saying so.
absl::StatusOr<LocalAccount> EnsureLocalAccount(const std::string& name);

// Runs argv as `account`: the child drops every group, takes the account's gid and uid, and
// execs with HOME set to the account's home and a minimal environment (plus `extra_env`,
// "NAME=value" entries).
CommandResult RunCommandAs(const LocalAccount& account, const std::vector<std::string>& argv,
                           absl::Duration timeout = absl::Seconds(60),
                           const std::vector<std::string>& extra_env = {});

// A copy of a Bazel-built binary (e.g. "client/gpuprof") in a directory that every account can
// read and execute; copied once per test process.
std::string SharedBinary(const std::string& workspace_relative);

}  // namespace gpuprof::testing

#endif  // GPUPROF_TESTS_TESTING_LOCAL_ACCOUNT_H_
