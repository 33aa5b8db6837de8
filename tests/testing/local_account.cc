#include "tests/testing/local_account.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>

#include "absl/strings/str_cat.h"

namespace gpuprof::testing {
namespace {

std::optional<LocalAccount> LookUp(const std::string& name) {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr) {
    return std::nullopt;
  }
  return LocalAccount{name, found->pw_uid, found->pw_gid, ""};
}

// A home of its own under /tmp (the account has none), owned by the account.
absl::Status MakeHome(LocalAccount& account) {
  std::string pattern = absl::StrCat("/tmp/gpuprof-home-", account.name, "-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", pattern, ": ", strerror(errno)));
  }
  if (chown(pattern.c_str(), account.uid, account.gid) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot give ", pattern, " to ", account.name, ": ", strerror(errno)));
  }
  account.home = pattern;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LocalAccount> EnsureLocalAccount(const std::string& name) {
  std::optional<LocalAccount> account = LookUp(name);
  if (!account.has_value()) {
    if (geteuid() != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "local account ", name, " does not exist and this test does not run as root, so it "
          "cannot make it (as root: useradd --system --no-create-home ", name, ")"));
    }
    const std::string useradd =
        std::filesystem::exists("/usr/sbin/useradd") ? "/usr/sbin/useradd" : "/sbin/useradd";
    std::string last_error;
    // Tests running side by side may add accounts at once; useradd then fails to lock
    // /etc/passwd, or finds the account made by the other one.
    for (int attempt = 0; attempt < 20 && !account.has_value(); ++attempt) {
      const CommandResult added = RunCommand(
          {useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name},
          absl::Seconds(30));
      account = LookUp(name);
      if (!account.has_value()) {
        last_error = absl::StrCat(added.out, added.err, " (exit ", added.exit_code, ")");
        absl::SleepFor(absl::Milliseconds(100 + 50 * attempt));
      }
    }
    if (!account.has_value()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create local account ", name, ": ", last_error));
    }
  }
  if (account->uid == geteuid()) {
    return absl::FailedPreconditionError(
        absl::StrCat("local account ", name, " is this test's own uid; it must be another"));
  }
  if (absl::Status home = MakeHome(*account); !home.ok()) return home;
  return *account;
}

CommandResult RunCommandAs(const LocalAccount& account, const std::vector<std::string>& argv,
                           absl::Duration timeout, const std::vector<std::string>& extra_env) {
  std::vector<std::string> environment = {
      "HOME=" + account.home, "USER=" + account.name, "LOGNAME=" + account.name,
      "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"};
  environment.insert(environment.end(), extra_env.begin(), extra_env.end());
  const uid_t uid = account.uid;
  const gid_t gid = account.gid;
  const std::string home = account.home;
  // The account's groups, looked up before fork (the group database is not safe to read
  // between fork and exec).
  std::vector<gid_t> groups(64);
  int count = static_cast<int>(groups.size());
  if (getgrouplist(account.name.c_str(), gid, groups.data(), &count) < 0) {
    groups.resize(count);
    getgrouplist(account.name.c_str(), gid, groups.data(), &count);
  }
  groups.resize(std::max(count, 0));
  return RunCommandWithSetup(argv, timeout, environment, [uid, gid, home, &groups] {
    // Between fork and exec: async-signal-safe calls only. A failure must not run the command
    // with the test's own (root) identity.
    if (setgroups(groups.size(), groups.data()) != 0 || setgid(gid) != 0 || setuid(uid) != 0 ||
        chdir(home.c_str()) != 0) {
      _exit(126);
    }
  });
}

std::string SharedBinary(const std::string& workspace_relative) {
  static std::mutex mutex;
  static std::map<std::string, std::string> copies;
  static std::string directory;
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = copies.find(workspace_relative); it != copies.end()) return it->second;
  if (directory.empty()) {
    std::string pattern = "/tmp/gpuprof-bin-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) return "";
    chmod(pattern.c_str(), 0755);
    directory = pattern;
  }
  const std::filesystem::path source = RunfilePath(workspace_relative);
  const std::string copy = absl::StrCat(directory, "/", source.filename().string());
  std::error_code error;
  std::filesystem::copy_file(source, copy, std::filesystem::copy_options::overwrite_existing,
                             error);
  if (error) return "";
  chmod(copy.c_str(), 0755);
  copies[workspace_relative] = copy;
  return copy;
}

}  // namespace gpuprof::testing
