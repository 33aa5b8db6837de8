#include "tests/testing/private_tmpfs.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace gpuprof::testing {

int RerunInPrivateTmpfs(const std::string& test_name, const std::string& mount_point,
                        const std::string& size, std::string& why) {
  // Everything the child needs is prepared before fork: after it, only system calls.
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  const std::string uid_map = absl::StrCat("0 ", uid, " 1\n");
  const std::string gid_map = absl::StrCat("0 ", gid, " 1\n");
  const std::string options = absl::StrCat("size=", size);
  const std::string filter = "--gtest_filter=" + test_name;
  std::vector<std::string> env_strings;
  for (char** entry = environ; *entry != nullptr; ++entry) env_strings.push_back(*entry);
  env_strings.push_back(absl::StrCat(kPrivateTmpfsEnv, "=", mount_point));
  std::vector<char*> envp;
  for (std::string& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  char* const argv[] = {const_cast<char*>(self.c_str()), const_cast<char*>(filter.c_str()),
                        nullptr};

  int reasons[2];
  if (pipe2(reasons, O_CLOEXEC) != 0) {
    why = "pipe failed";
    return kNoPrivateTmpfs;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    auto fail = [&](const char* what) {
      const int error = errno;
      (void)!write(reasons[1], what, strlen(what));
      (void)!write(reasons[1], ": ", 2);
      (void)!write(reasons[1], strerror(error), strlen(strerror(error)));
      _exit(kNoPrivateTmpfs);
    };
    auto write_file = [&](const char* path, const std::string& text) {
      const int fd = open(path, O_WRONLY);
      if (fd < 0 || write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
        fail(path);
      }
      close(fd);
    };
    if (unshare(CLONE_NEWNS | (uid == 0 ? 0 : CLONE_NEWUSER)) != 0) {
      fail(uid == 0 ? "unshare(CLONE_NEWNS)" : "unshare(CLONE_NEWUSER | CLONE_NEWNS)");
    }
    if (uid != 0) {
      write_file("/proc/self/setgroups", "deny");
      write_file("/proc/self/uid_map", uid_map);
      write_file("/proc/self/gid_map", gid_map);
    }
    // The tmpfs must stay in this namespace, never propagate to the host's.
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      fail("making the mounts private");
    }
    if (mount("tmpfs", mount_point.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      fail("mount tmpfs");
    }
    execve(argv[0], argv, envp.data());
    fail("execve");
  }
  close(reasons[1]);
  char buffer[512];
  const ssize_t n = read(reasons[0], buffer, sizeof(buffer));
  close(reasons[0]);
  if (n > 0) why.assign(buffer, static_cast<size_t>(n));
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool FillFilesystem(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return false;
  const std::string block(4096, '\0');
  while (write(fd, block.data(), block.size()) > 0) {
  }
  const bool full = errno == ENOSPC;
  close(fd);
  return full;
}

}  // namespace gpuprof::testing
