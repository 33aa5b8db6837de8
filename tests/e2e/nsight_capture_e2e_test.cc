// A capture's plumbing through the real daemon, worker and CLI on a host without GPUs or Nsight
// (CI): gpuprofd is given a stand-in for nsys (nsight/stand_in_nsys_for_plumbing_test.sh, which
// runs the worker's child as nsys would and writes a small file where nsys writes its report),
// so that what is tested is the daemon's side: the tool found and run, the report kept under the
// state directory and recorded in the result, `gpuprof report` fetching it byte for byte, the
// refusals (no report, a file that exists, a tool not installed), and the report kept across a
// restart. Real ncu and nsys reports come from tools/device/runs/nsight_capture.sh on a GPU.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(NsightCaptureE2eTest, AReportIsKeptFetchedRefusedWhereItShouldBeAndSurvivesARestart) {
  const std::string state = MakeTempDir("gpuprofd");
  const std::string stand_in = RunfilePath("tests/e2e/nsight/stand_in_nsys_for_plumbing_test.sh");
  DaemonProcess daemon(state, {"--cpu_slots=1", "--nsys_path=" + stand_in,
                               "--ncu_path=/nonexistent/ncu"});
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  EXPECT_THAT(daemon.Log(), HasSubstr("nsys: " + stand_in));

  const CommandResult run = daemon.Cli(
      {"submit", "radix", "--requests", "200", "--users", "2", "--capture", "nsys", "--follow"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err << daemon.Log();
  const std::string kept = state + "/reports/exp-000001.nsys-rep";
  ASSERT_TRUE(std::filesystem::exists(kept));
  // The tool ran the worker's own binary as its child.
  EXPECT_THAT(ReadFile(kept), HasSubstr("--capture-child="));

  const std::string out = MakeTempDir("out");
  const CommandResult fetched = daemon.Cli({"report", "exp-000001", "-o", out + "/r.nsys-rep"});
  ASSERT_EQ(fetched.exit_code, 0) << fetched.err;
  EXPECT_THAT(fetched.out, HasSubstr("nsys report of exp-000001"));
  EXPECT_THAT(fetched.out, HasSubstr("nsys stats " + out + "/r.nsys-rep"));
  EXPECT_EQ(ReadFile(out + "/r.nsys-rep"), ReadFile(kept));
  const CommandResult json = daemon.Cli({"get", "exp-000001", "--json"});
  EXPECT_THAT(json.out, HasSubstr("\"captureReport\""));

  // Not over a file that exists (without --force); to stdout as is.
  const CommandResult again = daemon.Cli({"report", "exp-000001", "-o", out + "/r.nsys-rep"});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_THAT(again.err, HasSubstr("exists; give --force"));
  const CommandResult to_stdout = daemon.Cli({"report", "exp-000001", "-o", "-"});
  EXPECT_EQ(to_stdout.exit_code, 0);
  EXPECT_EQ(to_stdout.out, ReadFile(kept));

  // An experiment without a capture has no report; a tool that is not installed is refused.
  ASSERT_EQ(daemon.Cli({"submit", "radix", "--requests", "200", "--follow"}).exit_code, 0);
  const CommandResult none = daemon.Cli({"report", "exp-000002"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("was not submitted with a capture"));
  const CommandResult no_ncu =
      daemon.Cli({"submit", "index", "--tokens", "64", "--capture", "ncu"});
  EXPECT_EQ(no_ncu.exit_code, 2);
  EXPECT_THAT(no_ncu.err, HasSubstr("ncu is not installed on this node (looked in "
                                    "/nonexistent/ncu)"));
  EXPECT_THAT(no_ncu.err, HasSubstr("--ncu_path=FILE"));

  // Kept across a restart: the file in the state directory, its record in the database.
  EXPECT_EQ(daemon.Stop(), 0);
  ASSERT_TRUE(daemon.Start().ok()) << daemon.Log();
  const CommandResult after = daemon.Cli({"report", "exp-000001", "-o", out + "/after.nsys-rep"});
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(ReadFile(out + "/after.nsys-rep"), ReadFile(kept));
}

}  // namespace
}  // namespace gpuprof::testing
