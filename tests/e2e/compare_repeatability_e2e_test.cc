// Two runs of the same sweep on the same build are the same: compare, gated, flags no point as
// worse or better, run after run. Radix is the figure most at the mercy of the machine (CPU
// work on a CI box whose two cores run other tests meanwhile): its passes' noise does not bound
// another run, so compare leaves its points unjudged unless told a run-to-run noise
// (--cpu-run-noise), and says so.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The sweep id `sweep ... --follow` printed ("submitted swp-000003: 2 points", on stderr
// since the table is stdout's).
std::string SweepIdOf(const CommandResult& result) {
  for (absl::string_view line : absl::StrSplit(result.err + "\n" + result.out, '\n')) {
    if (!absl::ConsumePrefix(&line, "submitted ")) continue;
    return std::string(line.substr(0, line.find(':')));
  }
  return "";
}

TEST(CompareRepeatabilityE2eTest, IdenticalRadixSweepsAreNeverFlagged) {
  DaemonProcess daemon(MakeTempDir("gpuprofd"));
  const absl::Status started = daemon.Start();
  ASSERT_TRUE(started.ok()) << started << "\n" << daemon.Log();
  const std::vector<std::string> sweep = {"sweep", "radix", "--requests", "300,1200",
                                          "--follow"};
  constexpr int kPairs = 3;
  for (int pair = 0; pair < kPairs; ++pair) {
    const CommandResult first = daemon.Cli(sweep);
    ASSERT_EQ(first.exit_code, 0) << first.err;
    const CommandResult second = daemon.Cli(sweep);
    ASSERT_EQ(second.exit_code, 0) << second.err;
    const std::string a = SweepIdOf(first), b = SweepIdOf(second);
    ASSERT_FALSE(a.empty()) << first.out << first.err;
    ASSERT_FALSE(b.empty()) << second.out << second.err;

    const CommandResult compared =
        daemon.Cli({"compare", a, b, "--fail-on-regression", "3"});
    // Exit 0: no regression gated; and nothing called better either.
    EXPECT_EQ(compared.exit_code, 0) << compared.out << compared.err;
    EXPECT_THAT(compared.out, HasSubstr("2 point(s) compared"));
    EXPECT_THAT(compared.out, HasSubstr("0 worse"));
    EXPECT_THAT(compared.out, HasSubstr("0 better"));
    EXPECT_THAT(compared.out, Not(HasSubstr(" worse\n"))) << compared.out;
    EXPECT_THAT(compared.out, Not(HasSubstr(" better\n"))) << compared.out;
    // Each point is reported, with its change, as not judged.
    EXPECT_THAT(compared.out, HasSubstr("2 noise unknown")) << compared.out;
    EXPECT_THAT(compared.err, HasSubstr("not gated: 2 point(s) whose noise is unknown"));
  }
}

}  // namespace
}  // namespace gpuprof::testing
