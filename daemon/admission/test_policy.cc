#include "daemon/admission/test_policy.h"

#include <stdlib.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace gpuprof::daemon {

std::string NewTestDir(absl::string_view prefix) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string pattern = absl::StrCat(tmp == nullptr ? "/tmp" : tmp, "/", prefix, "-XXXXXX");
  const char* made = mkdtemp(pattern.data());
  return made == nullptr ? "" : std::string(made);
}

absl::StatusOr<std::unique_ptr<AccessControl>> WriteTestPolicy(const std::string& dir,
                                                               absl::string_view users) {
  const std::string path = dir + "/policy.textproto";
  std::ofstream(path) << "policy_version: 1\n"
                         "daemon_user_is_admin: false\n"
                      << users << "end_of_policy: true\n";
  return AccessControl::Create(path);
}

}  // namespace gpuprof::daemon
