#include "daemon/store/private_state.h"

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpuprof::daemon {
namespace {

std::string Mode(mode_t mode) { return absl::StrFormat("%04o", mode & 07777); }

// Tightens `path` to `wanted` if group or others have any access; `what` names it.
absl::Status Tighten(const std::string& path, mode_t wanted, const std::string& what,
                     std::vector<std::string>& changes) {
  struct stat status {};
  if (lstat(path.c_str(), &status) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::PermissionDeniedError(
        absl::StrCat("cannot inspect ", what, " ", path, ": ", strerror(errno)));
  }
  if (S_ISLNK(status.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " ", path, " is a symbolic link; give the real path (a link could be "
        "redirected by whoever owns it)"));
  }
  if (status.st_uid != geteuid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " ", path, " belongs to uid ", status.st_uid, ", not to the daemon's uid ",
        geteuid(), "; another account could read or replace it. Give the daemon a ", what,
        " of its own (chown it, or choose another --state_dir)"));
  }
  if ((status.st_mode & 077) == 0) return absl::OkStatus();
  if (chmod(path.c_str(), wanted) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot tighten ", what, " ", path,
                                                    " from mode ", Mode(status.st_mode),
                                                    ": ", strerror(errno)));
  }
  changes.push_back(absl::StrCat(what, " ", path, " had mode ", Mode(status.st_mode),
                                 ", readable or writable by other accounts; now ",
                                 Mode(wanted)));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> SecureStateDirectory(const std::string& directory) {
  std::vector<std::string> changes;
  const std::filesystem::path path(directory);
  if (!std::filesystem::exists(std::filesystem::symlink_status(path))) {
    std::error_code error;
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), error);
    if (mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create state directory ", directory, ": ", strerror(errno)));
    }
  }
  struct stat status {};
  if (lstat(directory.c_str(), &status) == 0 && !S_ISDIR(status.st_mode) &&
      !S_ISLNK(status.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("state directory ", directory, " exists and is not a directory"));
  }
  if (absl::Status tightened = Tighten(directory, 0700, "state directory", changes);
      !tightened.ok()) {
    return tightened;
  }
  return changes;
}

absl::StatusOr<std::vector<std::string>> SecureDatabaseFiles(const std::string& database) {
  std::vector<std::string> changes;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    if (absl::Status tightened =
            Tighten(database + suffix, 0600, *suffix == '\0' ? "database" : "database file",
                    changes);
        !tightened.ok()) {
      return tightened;
    }
  }
  return changes;
}

absl::StatusOr<std::vector<std::string>> PrepareSocketDirectory(const std::string& socket_path) {
  std::vector<std::string> changes;
  const std::filesystem::path directory = std::filesystem::path(socket_path).parent_path();
  if (directory.empty() || std::filesystem::exists(directory)) return changes;
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create the unix socket's directory ",
                                                    directory.string(), ": ", error.message()));
  }
  chmod(directory.c_str(), 0755);
  changes.push_back(absl::StrCat("created ", directory.string(), " (mode 0755) for the socket"));
  return changes;
}

absl::StatusOr<gid_t> GroupByName(const std::string& name) {
  group entry{};
  group* found = nullptr;
  std::vector<char> buffer(16384);
  if (getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--socket_group: no group named \"", name, "\" in the group database"));
  }
  return found->gr_gid;
}

}  // namespace gpuprof::daemon
