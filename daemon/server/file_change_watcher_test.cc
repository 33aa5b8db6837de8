// The watcher against real files: content edits, a Kubernetes-style symlink swap that keeps
// size and mtime, removal; unchanged files are never reported.
#include "daemon/server/file_change_watcher.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gpuprof::daemon {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;

class Recorder {
 public:
  void Record(const std::vector<std::string>& changed) {
    absl::MutexLock lock(&mutex_);
    for (const auto& path : changed) seen_.push_back(path);
  }
  // The paths reported so far, once at least `count` were (or after a generous deadline).
  std::vector<std::string> WaitFor(size_t count) {
    absl::MutexLock lock(&mutex_);
    wanted_ = count;
    mutex_.AwaitWithTimeout(absl::Condition(this, &Recorder::Enough), absl::Seconds(30));
    return seen_;
  }

 private:
  bool Enough() const ABSL_SHARED_LOCKS_REQUIRED(mutex_) { return seen_.size() >= wanted_; }

  absl::Mutex mutex_;
  std::vector<std::string> seen_ ABSL_GUARDED_BY(mutex_);
  size_t wanted_ ABSL_GUARDED_BY(mutex_) = 0;
};

std::string TempDir() {
  std::string pattern =
      fs::path(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") / "watch-XXXXXX";
  return mkdtemp(pattern.data());
}

// Whole files only (a new file renamed into place), so that a poll never sees one half-written.
void Write(const std::string& path, const std::string& text) {
  std::ofstream(path + ".new") << text;
  fs::rename(path + ".new", path);
}

TEST(FileChangeWatcherTest, ReportsOnlyTheFileThatChanged) {
  const std::string dir = TempDir();
  Write(dir + "/a", "one");
  Write(dir + "/b", "one");
  Recorder recorder;
  FileChangeWatcher watcher({dir + "/a", dir + "/b"}, absl::Milliseconds(20),
                            [&](const auto& changed) { recorder.Record(changed); });
  Write(dir + "/b", "two two");
  EXPECT_THAT(recorder.WaitFor(1), ElementsAre(dir + "/b"));
  // Then a second, later change of the other file: reported once, on its own.
  Write(dir + "/a", "three three three");
  EXPECT_THAT(recorder.WaitFor(2), ElementsAre(dir + "/b", dir + "/a"));
}

TEST(FileChangeWatcherTest, SeesAConfigMapStyleSymlinkSwapWithTheSameSizeAndTime) {
  // The kubelet's layout: file -> ..data/file, ..data -> ..<timestamp>; an update writes a new
  // timestamped directory and renames a new ..data symlink over the old one.
  const std::string dir = TempDir();
  fs::create_directory(dir + "/..v1");
  fs::create_directory(dir + "/..v2");
  Write(dir + "/..v1/policy.textproto", "# v1\n");
  Write(dir + "/..v2/policy.textproto", "# v2\n");
  // Same size and modification time: only the inode tells them apart.
  const struct timespec times[2] = {{1700000000, 0}, {1700000000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, (dir + "/..v1/policy.textproto").c_str(), times, 0), 0);
  ASSERT_EQ(utimensat(AT_FDCWD, (dir + "/..v2/policy.textproto").c_str(), times, 0), 0);
  fs::create_directory_symlink("..v1", dir + "/..data");
  fs::create_symlink("..data/policy.textproto", dir + "/policy.textproto");

  Recorder recorder;
  const std::string watched = dir + "/policy.textproto";
  FileChangeWatcher watcher({watched}, absl::Milliseconds(20),
                            [&](const auto& changed) { recorder.Record(changed); });
  fs::create_directory_symlink("..v2", dir + "/..data_tmp");
  fs::rename(dir + "/..data_tmp", dir + "/..data");
  EXPECT_THAT(recorder.WaitFor(1), ElementsAre(watched));
  std::ifstream now(watched);
  std::string text((std::istreambuf_iterator<char>(now)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "# v2\n");
}

TEST(FileChangeWatcherTest, RemovalAndReappearanceAreChanges) {
  const std::string dir = TempDir();
  Write(dir + "/cert.pem", "old");
  Recorder recorder;
  FileChangeWatcher watcher({dir + "/cert.pem"}, absl::Milliseconds(20),
                            [&](const auto& changed) { recorder.Record(changed); });
  fs::remove(dir + "/cert.pem");
  EXPECT_EQ(recorder.WaitFor(1).size(), 1u);
  Write(dir + "/cert.pem", "new");
  EXPECT_EQ(recorder.WaitFor(2).size(), 2u);
  EXPECT_TRUE(FileChangeWatcher::Take(dir + "/cert.pem").exists);
  EXPECT_FALSE(FileChangeWatcher::Take(dir + "/missing").exists);
}

// A CRL directory: `openssl ca -gencrl -out crl/ca.crl.pem` rewrites the file in place, behind
// the hashed symlink, which changes neither the directory's size nor its time.
TEST(FileChangeWatcherTest, ADirectoryChangesWithTheFilesInIt) {
  const std::string dir = TempDir();
  fs::create_directory(dir + "/crl");
  Write(dir + "/crl/ca.crl.pem", "crl 1");
  fs::create_symlink("ca.crl.pem", dir + "/crl/0123abcd.r0");
  const FileChangeWatcher::Fingerprint before = FileChangeWatcher::Take(dir + "/crl");
  EXPECT_EQ(FileChangeWatcher::Take(dir + "/crl"), before);
  Recorder recorder;
  FileChangeWatcher watcher({dir + "/crl"}, absl::Milliseconds(20),
                            [&](const auto& changed) { recorder.Record(changed); });
  std::ofstream(dir + "/crl/ca.crl.pem", std::ios::trunc) << "crl 2, longer";
  EXPECT_THAT(recorder.WaitFor(1), ElementsAre(dir + "/crl"));
  const FileChangeWatcher::Fingerprint after = FileChangeWatcher::Take(dir + "/crl");
  EXPECT_EQ(after.modified_ns, before.modified_ns);  // the directory itself did not change
  EXPECT_NE(after, before);
}

}  // namespace
}  // namespace gpuprof::daemon
