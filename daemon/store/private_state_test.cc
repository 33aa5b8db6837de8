#include "daemon/store/private_state.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace gpuprof::daemon {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat status {};
  EXPECT_EQ(stat(path.c_str(), &status), 0) << path;
  return status.st_mode & 07777;
}

std::string FreshDir(const std::string& name) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(path);
  return path;
}

TEST(SecureStateDirectoryTest, CreatesPrivate) {
  const std::string dir = FreshDir("state-new") + "/nested";
  auto changes = SecureStateDirectory(dir);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_EQ(ModeOf(dir), 0700u);
}

TEST(SecureStateDirectoryTest, TightensAWideDirectoryAndSaysSo) {
  const std::string dir = FreshDir("state-wide");
  ASSERT_TRUE(std::filesystem::create_directories(dir));
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  auto changes = SecureStateDirectory(dir);
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->size(), 1u);
  EXPECT_NE((*changes)[0].find("had mode 0755"), std::string::npos) << (*changes)[0];
  EXPECT_EQ(ModeOf(dir), 0700u);
  // Already private: nothing to say.
  changes = SecureStateDirectory(dir);
  ASSERT_TRUE(changes.ok());
  EXPECT_TRUE(changes->empty());
}

TEST(SecureStateDirectoryTest, RefusesASymbolicLink) {
  const std::string dir = FreshDir("state-target");
  ASSERT_TRUE(std::filesystem::create_directories(dir));
  const std::string link = FreshDir("state-link");
  std::filesystem::create_directory_symlink(dir, link);
  auto changes = SecureStateDirectory(link);
  ASSERT_FALSE(changes.ok());
  EXPECT_NE(changes.status().message().find("symbolic link"), std::string::npos);
}

TEST(SecureDatabaseFilesTest, TightensTheDatabaseAndItsCompanions) {
  const std::string dir = FreshDir("db-files");
  ASSERT_TRUE(std::filesystem::create_directories(dir));
  const std::string db = dir + "/gpuprof.db";
  for (const std::string& path : {db, db + "-wal", db + "-shm"}) {
    std::ofstream(path) << "x";
    ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  }
  auto changes = SecureDatabaseFiles(db);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_EQ(changes->size(), 3u);
  for (const std::string& path : {db, db + "-wal", db + "-shm"}) EXPECT_EQ(ModeOf(path), 0600u);
}

TEST(GroupByNameTest, KnownAndUnknown) {
  EXPECT_TRUE(GroupByName("root").ok());
  auto missing = GroupByName("no-such-group-gpuprof");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--socket_group"), std::string::npos);
}

}  // namespace
}  // namespace gpuprof::daemon
