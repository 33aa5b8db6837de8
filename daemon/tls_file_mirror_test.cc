#include "daemon/tls_file_mirror.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprof::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Read(const std::string& path) {
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

class TlsFileMirrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(getenv("TEST_TMPDIR")) + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
    sources_ = {dir_ + "/server.pem", dir_ + "/server.key", dir_ + "/ca.pem"};
    std::ofstream(sources_.cert) << "cert 1";
    std::ofstream(sources_.key) << "key 1";
    std::ofstream(sources_.ca) << "ca 1";
  }
  std::string dir_;
  TlsFileMirror::Files sources_;
};

TEST_F(TlsFileMirrorTest, CopiesAtCreationAndOnlyWhatChangedOnRefresh) {
  auto mirror = TlsFileMirror::Create(sources_, dir_ + "/in-use");
  ASSERT_TRUE(mirror.ok()) << mirror.status();
  const TlsFileMirror::Files& copies = (*mirror)->copies();
  EXPECT_EQ(Read(copies.cert), "cert 1");
  EXPECT_EQ(Read(copies.key), "key 1");
  EXPECT_EQ(Read(copies.ca), "ca 1");
  struct stat key_stat {};
  ASSERT_EQ(stat(copies.key.c_str(), &key_stat), 0);
  EXPECT_EQ(key_stat.st_mode & 0777, 0600u);
  // Nothing changed: nothing copied.
  auto unchanged = (*mirror)->Refresh();
  ASSERT_TRUE(unchanged.ok());
  EXPECT_TRUE(unchanged->empty());
  // The configured files change; the copies follow only when asked.
  std::ofstream(sources_.cert) << "cert 2";
  std::ofstream(sources_.ca) << "ca 2";
  EXPECT_EQ(Read(copies.cert), "cert 1");
  auto changed = (*mirror)->Refresh();
  ASSERT_TRUE(changed.ok());
  EXPECT_THAT(*changed, ElementsAre(sources_.cert, sources_.ca));
  EXPECT_EQ(Read(copies.cert), "cert 2");
  EXPECT_EQ(Read(copies.key), "key 1");
  EXPECT_EQ(Read(copies.ca), "ca 2");
}

TEST_F(TlsFileMirrorTest, AnUnreadableSourceChangesNoCopy) {
  auto mirror = TlsFileMirror::Create(sources_, dir_ + "/in-use");
  ASSERT_TRUE(mirror.ok()) << mirror.status();
  std::ofstream(sources_.cert) << "cert 2";
  std::filesystem::remove(sources_.key);
  auto refused = (*mirror)->Refresh();
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr(sources_.key));
  EXPECT_EQ(Read((*mirror)->copies().cert), "cert 1");
}

TEST_F(TlsFileMirrorTest, CreationNamesAMissingFile) {
  std::filesystem::remove(sources_.ca);
  auto mirror = TlsFileMirror::Create(sources_, dir_ + "/in-use");
  ASSERT_FALSE(mirror.ok());
  EXPECT_THAT(mirror.status().message(), HasSubstr(sources_.ca));
}

}  // namespace
}  // namespace gpuprof::daemon
