#include "client/token_hash.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprof::client {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(Sha256HexTest, KnownDigests) {
  // printf %s hello | sha256sum
  EXPECT_EQ(Sha256Hex("hello"), "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(TokenAsSentTest, DropsSurroundingWhitespaceAsTheCliDoes) {
  EXPECT_EQ(*TokenAsSent("s3cret\n", "t"), "s3cret");
  EXPECT_EQ(*TokenAsSent("  s3cret \r\n", "t"), "s3cret");
  EXPECT_EQ(TokenAsSent("\n\n", "--token f").status().message(),
            "--token f: holds no token (it is empty)");
}

TEST(TokenAsSentTest, ATokenGrpcCannotSendIsRefusedWithoutShowingIt) {
  const absl::Status status = TokenAsSent("abc\ndef\n", "stdin").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("stdin: U+000A (newline) at byte 3 cannot be sent"));
  EXPECT_THAT(status.message(), Not(HasSubstr("abc")));
}

TEST(PolicyTokenLineTest, TheLineToPaste) {
  EXPECT_EQ(*PolicyTokenLine("ci", Sha256Hex("hello")),
            "tokens { user: \"ci\" sha256: "
            "\"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\" }");
  EXPECT_THAT(PolicyTokenLine("a\"b", "x").status().message(),
              HasSubstr("--user-name \"a\\\"b\": byte 1 (\\\") is not allowed"));
  EXPECT_THAT(PolicyTokenLine("a b", "x").status().message(), HasSubstr("no whitespace"));
  EXPECT_THAT(PolicyTokenLine("(other)", "x").status().message(), HasSubstr("parentheses"));
  EXPECT_FALSE(PolicyTokenLine("", "x").ok());
}

TEST(GenerateTokenTest, ThirtyTwoRandomBytesInBase64Url) {
  const absl::StatusOr<std::string> first = GenerateToken();
  const absl::StatusOr<std::string> second = GenerateToken();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_THAT(*first, MatchesRegex("[A-Za-z0-9_-]{43}"));
  EXPECT_NE(*first, *second);
}

TEST(WriteNewTokenFileTest, OwnerOnlyAndNeverOverwrites) {
  const std::string path = TempPath("token_hash_test_new");
  unlink(path.c_str());
  // Even with a permissive umask the file is 0600.
  const mode_t old_umask = umask(0);
  const absl::Status written = WriteNewTokenFile(path, "tok");
  umask(old_umask);
  ASSERT_TRUE(written.ok()) << written;
  struct stat info {};
  ASSERT_EQ(stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  EXPECT_EQ(contents.str(), "tok\n");

  const absl::Status again = WriteNewTokenFile(path, "other");
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr("already exists"));
  std::ifstream unchanged(path);
  std::stringstream kept;
  kept << unchanged.rdbuf();
  EXPECT_EQ(kept.str(), "tok\n");
}

TEST(WriteNewTokenFileTest, ALinkIsNotFollowed) {
  const std::string target = TempPath("token_hash_test_target");
  const std::string link = TempPath("token_hash_test_link");
  unlink(target.c_str());
  unlink(link.c_str());
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  EXPECT_FALSE(WriteNewTokenFile(link, "tok").ok());
  EXPECT_NE(access(target.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace gpuprof::client
