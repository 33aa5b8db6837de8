#include "daemon/capture/nsight_tools.h"

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpuprof::daemon {
namespace {

using ::gpuprof::v1::NsightCapture;

TEST(NsightToolsTest, CandidatesArePathThenCudaThenNewestInstallFirst) {
  const std::vector<std::string> candidates = NsightToolCandidates(
      NsightCapture::TOOL_NSYS, "/usr/bin:/usr/local/cuda/bin/:",
      {"/opt/nvidia/nsight-systems/2024.1.1/bin/nsys",
       "/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys",
       "/opt/nvidia/nsight-systems/2025.3.2/bin/nsys"});
  // Nsight Systems' own installs before the copy inside Nsight Compute.
  EXPECT_EQ(candidates, (std::vector<std::string>{
                            "/usr/bin/nsys", "/usr/local/cuda/bin/nsys",
                            "/opt/nvidia/nsight-systems/2025.3.2/bin/nsys",
                            "/opt/nvidia/nsight-systems/2024.1.1/bin/nsys",
                            "/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys"}));
}

// `ncu --list-sets` of Nsight Compute 2025.3.1 on an H200, as it printed it: long section
// lists wrap onto lines that start with spaces.
constexpr char kListSets[] =
    "---------- -------------------------------------------------------------------------- "
    "------- -----------------\n"
    "Identifier Sections                                                                    "
    "Enabled Estimated Metrics\n"
    "---------- -------------------------------------------------------------------------- "
    "------- -----------------\n"
    "basic      LaunchStats, Occupancy, SpeedOfLight, WorkloadDistribution                  "
    "yes     213              \n"
    "detailed   ComputeWorkloadAnalysis, LaunchStats, MemoryWorkloadAnalysis, MemoryWorkloa "
    "no      906              \n"
    "           dAnalysis_Chart, Occupancy, SourceCounters, SpeedOfLight, SpeedOfLight_Roof "
    "                         \n"
    "           lineChart, WorkloadDistribution                                            \n"
    "full       ComputeWorkloadAnalysis, InstructionStats, LaunchStats, MemoryWorkloadAnaly "
    "no      7794             \n"
    "            SourceCounters, SpeedOfLight, SpeedOfLight_HierarchicalDoubleRooflineChart\n"
    "           , SpeedOfLight_HierarchicalHalfRooflineChart, SpeedOfLight_HierarchicalSing\n"
    "nvlink     Nvlink, Nvlink_Tables, Nvlink_Topology                                      "
    "no      122              \n"
    "pmsampling PmSampling, PmSampling_WarpStates                                           "
    "no      411              \n"
    "roofline   SpeedOfLight, SpeedOfLight_HierarchicalDoubleRooflineChart, SpeedOfLight_Hi "
    "no      6649             \n"
    "           orkloadDistribution                                                        \n";

TEST(NsightToolsTest, ReadsNcusSetsFromItsListAndChecksANameAgainstThem) {
  NsightTool ncu;
  ncu.version = "Version 2025.3.1.0";
  ncu.sets = ParseNcuSetList(kListSets);
  EXPECT_EQ(ncu.sets, (std::vector<std::string>{"basic", "detailed", "full", "nvlink",
                                                "pmsampling", "roofline"}));
  EXPECT_TRUE(CheckNcuSet(ncu, "roofline").ok());
  EXPECT_EQ(CheckNcuSet(ncu, "no-such-set").message(),
            "capture.ncu_set: got \"no-such-set\"; this node's ncu (Version 2025.3.1.0) has "
            "basic, detailed, full, nvlink, pmsampling, roofline (`ncu --list-sets`)");
  EXPECT_TRUE(ParseNcuSetList("").empty());
  // Output without the table's header (an error) leaves the sets unknown, so nothing is refused.
  EXPECT_TRUE(ParseNcuSetList("==ERROR== unrecognised option '--list-sets'\nbasic\n").empty());
}

TEST(NsightToolsTest, FindsTheFirstExecutableAndReadsItsVersion) {
  const std::set<std::string> executable = {"/b/ncu", "/c/ncu"};
  const NsightTool tool = FindNsightTool(
      NsightCapture::TOOL_NCU, "", {"/a/ncu", "/b/ncu", "/c/ncu"},
      [&](const std::string& file) { return executable.contains(file); },
      [](const std::string& file) { return "Version 2025.3.1.0 of " + file; });
  EXPECT_EQ(tool.path, "/b/ncu");
  EXPECT_EQ(tool.version, "Version 2025.3.1.0 of /b/ncu");
  EXPECT_EQ(tool.flag, "--ncu_path");
}

TEST(NsightToolsTest, AFlagIsTheOnlyPlaceLookedIn) {
  const NsightTool tool = FindNsightTool(
      NsightCapture::TOOL_NSYS, "/custom/nsys", {"/usr/bin/nsys"},
      [](const std::string& file) { return file == "/usr/bin/nsys"; },
      [](const std::string&) { return std::string("v"); });
  EXPECT_TRUE(tool.path.empty());
  EXPECT_EQ(tool.looked_in, std::vector<std::string>{"/custom/nsys"});
}

TEST(NsightToolsTest, AMissingToolIsRefusedSayingWhereItWasLookedForAndWhichFlagSetsIt) {
  CaptureTools tools;
  tools.ncu.path = "/usr/local/cuda/bin/ncu";
  tools.nsys.flag = "--nsys_path";
  tools.nsys.looked_in = {"/usr/bin/nsys", "/usr/local/cuda/bin/nsys"};
  EXPECT_TRUE(CheckCaptureToolAvailable(tools, NsightCapture::TOOL_NCU).ok());
  const absl::Status missing = CheckCaptureToolAvailable(tools, NsightCapture::TOOL_NSYS);
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(missing.message(),
            "capture.tool: nsys is not installed on this node (looked in /usr/bin/nsys, "
            "/usr/local/cuda/bin/nsys); install NVIDIA Nsight Systems or start gpuprofd with "
            "--nsys_path=FILE");
}

TEST(NsightToolsTest, ReportPathsCarryTheToolsExtension) {
  EXPECT_EQ(CaptureReportPath("/s/reports", "exp-000042", NsightCapture::TOOL_NCU),
            "/s/reports/exp-000042.ncu-rep");
  EXPECT_EQ(CaptureReportPath("/s/reports", "exp-000042", NsightCapture::TOOL_NSYS),
            "/s/reports/exp-000042.nsys-rep");
}

TEST(NsightToolsTest, VersionIsTheLastLineTheToolPrints) {
  // bash prints its version on several lines; the last is its licence's.
  EXPECT_EQ(RunVersionCommand("/bin/bash"), "There is NO WARRANTY, to the extent permitted by law.");
  EXPECT_EQ(RunVersionCommand("/nonexistent/ncu"), "");
}

}  // namespace
}  // namespace gpuprof::daemon
