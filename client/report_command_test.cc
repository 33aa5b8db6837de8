#include "client/report_command.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace gpuprof::client {
namespace {

TEST(ReportCommandTest, SaysWhereItWroteAndHowToOpenIt) {
  v1::CaptureReport ncu;
  ncu.set_tool(v1::NsightCapture::TOOL_NCU);
  ncu.set_size_bytes(1'234'567);
  ncu.set_tool_version("Version 2025.3.1.0");
  EXPECT_EQ(DescribeWrittenReport(ncu, "exp-000042", "gather.ncu-rep"),
            "wrote gather.ncu-rep (1.2 MB, ncu report of exp-000042, Version 2025.3.1.0); open "
            "it with ncu-ui, or `ncu --import gather.ncu-rep --page details`\n");
  v1::CaptureReport nsys;
  nsys.set_tool(v1::NsightCapture::TOOL_NSYS);
  nsys.set_size_bytes(2000);
  EXPECT_EQ(DescribeWrittenReport(nsys, "exp-7", "t.nsys-rep"),
            "wrote t.nsys-rep (2.0 KB, nsys report of exp-7); open it with nsys-ui, or `nsys "
            "stats t.nsys-rep`\n");
}

TEST(ReportCommandTest, AFileNamedAsTheOtherToolsReportIsRefused) {
  v1::CaptureReport nsys;
  nsys.set_tool(v1::NsightCapture::TOOL_NSYS);
  const absl::Status refused = CheckReportExtension(nsys, "out/exp-4.ncu-rep");
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            "-o out/exp-4.ncu-rep: this is an nsys report; name the file .nsys-rep (nsys-ui and "
            "nsys stats go by the extension)");
  EXPECT_TRUE(CheckReportExtension(nsys, "exp-4.nsys-rep").ok());
  EXPECT_TRUE(CheckReportExtension(nsys, "-").ok());
  EXPECT_TRUE(CheckReportExtension(nsys, "timeline.bin").ok());
  v1::CaptureReport ncu;
  ncu.set_tool(v1::NsightCapture::TOOL_NCU);
  EXPECT_FALSE(CheckReportExtension(ncu, "a.nsys-rep").ok());
  EXPECT_TRUE(CheckReportExtension(ncu, "a.ncu-rep").ok());
}

TEST(ReportCommandTest, AnExistingFileNeedsForceAndStdoutAlwaysGoes) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/exists.ncu-rep";
  std::ofstream(path) << "old";
  const absl::Status refused = CheckReportDestination(path, /*force=*/false);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message(), path + " exists; give --force to overwrite it, or another -o");
  EXPECT_TRUE(CheckReportDestination(path, /*force=*/true).ok());
  EXPECT_TRUE(CheckReportDestination("-", false).ok());
  EXPECT_TRUE(CheckReportDestination(path + ".new", false).ok());
}

}  // namespace
}  // namespace gpuprof::client
