#include "kernels/custom/compile_options.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::kernels {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ValidateUserCompileOptionsTest, AcceptsTheAllowedKinds) {
  EXPECT_TRUE(ValidateUserCompileOptions({}).ok());
  EXPECT_TRUE(ValidateUserCompileOptions({"-lineinfo", "--use_fast_math", "-maxrregcount=16",
                                          "-maxrregcount=255", "-DTILE", "-D_X=1", "-DSCALE=2.0f",
                                          "-DNEG=-3", "-DEMPTY="})
                  .ok());
}

TEST(ValidateUserCompileOptionsTest, RefusesEverythingElse) {
  for (const char* option : {"-maxrregcount=15",
                             "-maxrregcount=256",
                             "-maxrregcount=",
                             "-maxrregcount=+32",
                             "-maxrregcount=32x",
                             "-D",
                             "-D1X",
                             "-DX-Y",
                             "-DX=a b",
                             "-DX=\"s\"",
                             "-DX=$(id)",
                             "-DX=a;b",
                             "--gpu-architecture=sm_80",
                             "-include=/etc/passwd",
                             "-I/etc",
                             "-G",
                             "--use_fast_math ",
                             "-lineinfo=1",
                             "-ftemplate-depth=100000",
                             ""}) {
    const absl::Status status = ValidateUserCompileOptions({option});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << option;
  }
  EXPECT_THAT(ValidateUserCompileOptions({"-G"}).message(),
              AllOf(HasSubstr("\"-G\""), HasSubstr("-lineinfo, --use_fast_math")));
  EXPECT_TRUE(ValidateUserCompileOptions(std::vector<std::string>(32, "-lineinfo")).ok());
  EXPECT_EQ(ValidateUserCompileOptions(std::vector<std::string>(33, "-lineinfo")).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ValidateUserCompileOptionsTest, LongOptionsAndIdentifiers) {
  EXPECT_TRUE(IsAllowedUserCompileOption(std::string("-D") + std::string(254, 'A')));
  EXPECT_FALSE(IsAllowedUserCompileOption(std::string("-D") + std::string(255, 'A')));
  EXPECT_THAT(ValidateUserCompileOptions({std::string("-DX=") + std::string(300, 'a')}).message(),
              HasSubstr("longer than 256 bytes"));
  EXPECT_THAT(ValidateUserCompileOptions({"-DX=\x1b[2J"}).message(), HasSubstr("\\x1b"));
  EXPECT_TRUE(IsCIdentifier("_k2"));
  EXPECT_FALSE(IsCIdentifier("2k"));
  EXPECT_FALSE(IsCIdentifier(""));
  EXPECT_FALSE(IsCIdentifier("k\xc3\xa9"));
}

}  // namespace
}  // namespace gpuprof::kernels
