// A small file system for full-disk tests: the test reruns itself in a child process with a
// private mount namespace (plus a user namespace unless root) where a tmpfs is mounted, so
// that the mount never reaches the host's namespace and goes away with the child.
#ifndef GPUPROF_TESTS_TESTING_PRIVATE_TMPFS_H_
#define GPUPROF_TESTS_TESTING_PRIVATE_TMPFS_H_

#include <string>

namespace gpuprof::testing {

// Set in the child: the path where its tmpfs is mounted.
inline constexpr char kPrivateTmpfsEnv[] = "GPUPROF_TEST_PRIVATE_TMPFS";

// The exit code of RerunInPrivateTmpfs when no namespace or mount could be had here.
inline constexpr int kNoPrivateTmpfs = 77;

// Runs the test binary again with --gtest_filter=`test_name`, in a child whose private mount
// namespace has a tmpfs of `size` ("8m") mounted at `mount_point`, and kPrivateTmpfsEnv set.
// Returns the child's exit code; kNoPrivateTmpfs with `why` set when namespaces or the mount
// are not available.
int RerunInPrivateTmpfs(const std::string& test_name, const std::string& mount_point,
                        const std::string& size, std::string& why);

// Writes zeros to `path` until the file system has no space left; false if it stopped for
// another reason than ENOSPC.
bool FillFilesystem(const std::string& path);

}  // namespace gpuprof::testing

#endif  // GPUPROF_TESTS_TESTING_PRIVATE_TMPFS_H_
