#include "daemon/daemon_config.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gpuprof::daemon {

std::string DefaultStateDir() {
  if (geteuid() == 0) return "/var/lib/gpuprof";
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::string(xdg) + "/gpuprof";
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') {
    const passwd* entry = getpwuid(geteuid());
    home = entry != nullptr ? entry->pw_dir : "/tmp";
  }
  return std::string(home) + "/.local/state/gpuprof";
}

std::string DefaultDatabasePath(const std::string& state_dir) {
  return state_dir + "/gpuprof.db";
}

std::vector<std::string> DefaultListenAddresses(const std::string& state_dir) {
  // The state directory is private (0700): a daemon serving the whole box (root) puts its
  // socket where every account can reach it; a user's own daemon keeps it private.
  if (geteuid() == 0) return {kDefaultTcpAddress, "unix:/run/gpuprof/gpuprofd.sock"};
  return {kDefaultTcpAddress, "unix:" + state_dir + "/gpuprofd.sock"};
}

bool IsLoopbackListenAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  std::string host = colon == std::string::npos ? address : address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::string DefaultWorkerBinary() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "gpuprof_worker";
  const std::filesystem::path dir = self.parent_path();
  // Installed side by side; or a Bazel tree (bazel-bin/daemon/gpuprofd, bazel-bin/worker/...).
  for (const auto& candidate :
       {dir / "gpuprof_worker", dir.parent_path() / "worker" / "gpuprof_worker"}) {
    if (std::filesystem::exists(candidate, error)) return candidate.string();
  }
  return (dir / "gpuprof_worker").string();
}

std::vector<std::string> SplitAddresses(const std::string& list) {
  std::vector<std::string> addresses;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (!part.empty()) addresses.emplace_back(part);
  }
  return addresses;
}

}  // namespace gpuprof::daemon
