#include "worker/capture_command.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpuprof::worker {
namespace {

namespace v1 = ::gpuprof::v1;

bool Contains(const std::vector<std::string>& command, const std::vector<std::string>& run) {
  return std::search(command.begin(), command.end(), run.begin(), run.end()) != command.end();
}

TEST(CaptureCommandTest, PartialReportKeepsTheToolsExtension) {
  EXPECT_EQ(PartialReportPath("/var/lib/gpuprof/reports/exp-000042.ncu-rep"),
            "/var/lib/gpuprof/reports/exp-000042.partial.ncu-rep");
  EXPECT_EQ(PartialReportPath("/s/reports/exp-7.nsys-rep"), "/s/reports/exp-7.partial.nsys-rep");
}

TEST(CaptureCommandTest, NcuCommandWithDefaultsSkipsTheScaffoldingAndRunsTheChild) {
  v1::NsightCapture capture;
  capture.set_tool(v1::NsightCapture::TOOL_NCU);
  const std::vector<std::string> command =
      CaptureCommand(capture, "/usr/local/cuda/bin/ncu", "/r/exp-1.partial.ncu-rep",
                     "/opt/gpuprof/gpuprof_worker", "/tmp/x/assignment.pb");
  EXPECT_EQ(command.front(), "/usr/local/cuda/bin/ncu");
  EXPECT_TRUE(Contains(command, {"--set", "basic"}));
  EXPECT_TRUE(Contains(command, {"--kernel-name", std::string(kDefaultNcuKernelFilter)}));
  EXPECT_TRUE(Contains(command, {"--launch-skip", "0", "--launch-count", "1"}));
  EXPECT_TRUE(Contains(command, {"--export", "/r/exp-1.partial.ncu-rep"}));
  EXPECT_EQ(command[command.size() - 2], "/opt/gpuprof/gpuprof_worker");
  EXPECT_EQ(command.back(), "--capture-child=/tmp/x/assignment.pb");
  EXPECT_NE(kDefaultNcuKernelFilter.find("StreamBlockerKernel"), absl::string_view::npos);
}

TEST(CaptureCommandTest, NcuCommandTakesTheRequestsOptions) {
  v1::NsightCapture capture;
  capture.set_tool(v1::NsightCapture::TOOL_NCU);
  capture.set_ncu_set("full");
  capture.set_kernel_filter("regex:Index");
  capture.set_launch_skip(2);
  capture.set_launch_count(5);
  const std::vector<std::string> command = CaptureCommand(capture, "ncu", "out", "w", "a");
  EXPECT_TRUE(Contains(command, {"--set", "full", "--kernel-name", "regex:Index"}));
  EXPECT_TRUE(Contains(command, {"--launch-skip", "2", "--launch-count", "5"}));
}

TEST(CaptureCommandTest, NsysCommandProfilesTheChild) {
  v1::NsightCapture capture;
  capture.set_tool(v1::NsightCapture::TOOL_NSYS);
  const std::vector<std::string> command =
      CaptureCommand(capture, "/opt/nsys", "/r/exp-2.partial.nsys-rep", "/w", "/a.pb");
  ASSERT_GE(command.size(), 4u);
  EXPECT_EQ(command[1], "profile");
  EXPECT_TRUE(Contains(command, {"--output", "/r/exp-2.partial.nsys-rep", "/w",
                                 "--capture-child=/a.pb"}));
}

TEST(CaptureCommandTest, ChildRequestUnderNcuIsShortUntracedAndWarmsUpOverTheProfiledLaunches) {
  v1::ExperimentRequest request;
  request.mutable_index()->set_num_tokens(4096);
  request.mutable_tracing()->set_level(v1::TracingOptions::LEVEL_FULL);
  request.mutable_measurement()->set_warmup_iterations(10);
  request.mutable_measurement()->set_min_iterations(100);
  request.mutable_measurement()->set_max_iterations(1000);
  request.mutable_capture()->set_tool(v1::NsightCapture::TOOL_NCU);
  request.mutable_capture()->set_launch_skip(8);
  request.mutable_capture()->set_launch_count(4);
  const v1::ExperimentRequest child = RequestForCaptureChild(request);
  EXPECT_FALSE(child.has_capture());
  EXPECT_EQ(child.tracing().level(), v1::TracingOptions::LEVEL_OFF);
  EXPECT_EQ(child.measurement().warmup_iterations(), 12);
  EXPECT_EQ(child.measurement().min_iterations(), 1);
  EXPECT_EQ(child.measurement().max_iterations(), 1);
  EXPECT_EQ(child.index().num_tokens(), 4096);
}

TEST(CaptureCommandTest, ChildRequestUnderNsysKeepsTheMeasurement) {
  v1::ExperimentRequest request;
  request.mutable_measurement()->set_min_iterations(100);
  request.mutable_capture()->set_tool(v1::NsightCapture::TOOL_NSYS);
  const v1::ExperimentRequest child = RequestForCaptureChild(request);
  EXPECT_FALSE(child.has_capture());
  EXPECT_EQ(child.measurement().min_iterations(), 100);
  EXPECT_EQ(child.tracing().level(), v1::TracingOptions::LEVEL_OFF);
}

}  // namespace
}  // namespace gpuprof::worker
