#include "client/connection_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprof::client {
namespace {

using ::testing::HasSubstr;

TEST(CheckHeaderValueTest, PrintableAsciiPasses) {
  EXPECT_TRUE(CheckHeaderValue("--user", "alice", true).ok());
  EXPECT_TRUE(CheckHeaderValue("--user", "ci-bot@example.com", true).ok());
  EXPECT_TRUE(CheckHeaderValue("--token t", "AbC_-123~!", false).ok());
  EXPECT_TRUE(CheckHeaderValue("--user", "", true).ok());
}

// gRPC aborts the process (exit 134) on a header value it cannot send; these are refused first.
TEST(CheckHeaderValueTest, ControlAndNonAsciiBytesAreNamed) {
  const absl::Status newline = CheckHeaderValue("--user", "a\nb", true);
  EXPECT_EQ(newline.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(newline.message(),
            "--user \"a\\nb\": U+000A (newline) at byte 1 cannot be sent; it travels in a gRPC "
            "header, which carries printable ASCII only (0x20-0x7E)");
  EXPECT_THAT(CheckHeaderValue("$USER", "jos\xc3\xa9", true).message(),
              HasSubstr("$USER \"jos\xc3\xa9\": byte 0xC3 (not ASCII) at byte 3 cannot be sent"));
  EXPECT_THAT(CheckHeaderValue("--user", "x\x7f", true).message(),
              HasSubstr("U+007F (delete) at byte 1"));
  EXPECT_THAT(CheckHeaderValue("--user", "\x1b[2J", true).message(),
              HasSubstr("--user \"\\x1b[2J\": U+001B (escape) at byte 0"));
}

TEST(CheckHeaderValueTest, ATokenIsNeverShown) {
  const absl::Status status = CheckHeaderValue("$GPUPROF_TOKEN", "s3cret\ntail", false);
  EXPECT_EQ(status.message(),
            "$GPUPROF_TOKEN: U+000A (newline) at byte 6 cannot be sent; it travels in a gRPC "
            "header, which carries printable ASCII only (0x20-0x7E)");
  EXPECT_THAT(status.message(), ::testing::Not(HasSubstr("s3cret")));
}

}  // namespace
}  // namespace gpuprof::client
