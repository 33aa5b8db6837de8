#include "daemon/capture/capture_reports.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "daemon/capture/nsight_tools.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon {
namespace {

namespace v1 = ::gpuprof::v1;

class CaptureReportsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = std::string(tmp != nullptr ? tmp : "/tmp") + "/capture_reports_test";
    std::filesystem::create_directories(dir_);
    experiment_.set_id("exp-000042");
    experiment_.set_user("alice");
    experiment_.set_state(v1::FINISHED);
    experiment_.mutable_request()->mutable_capture()->set_tool(v1::NsightCapture::TOOL_NCU);
  }

  // Writes the report file and records it in the result, as the worker does.
  void Keep(const std::string& bytes) {
    std::ofstream(CaptureReportPath(dir_, "exp-000042", v1::NsightCapture::TOOL_NCU),
                  std::ios::binary)
        << bytes;
    v1::CaptureReport& report = *experiment_.mutable_result()->mutable_capture_report();
    report.set_file_name("exp-000042.ncu-rep");
    report.set_size_bytes(static_cast<int64_t>(bytes.size()));
  }

  std::string dir_;
  v1::Experiment experiment_;
};

TEST_F(CaptureReportsTest, OwnerSubmitterAndAdminsMayReadOthersMayNot) {
  experiment_.set_submitted_by("root");
  EXPECT_TRUE(CheckMayReadCaptureReport(experiment_, "alice", false).ok());
  EXPECT_TRUE(CheckMayReadCaptureReport(experiment_, "root", false).ok());
  EXPECT_TRUE(CheckMayReadCaptureReport(experiment_, "bob", true).ok());
  const absl::Status refused = CheckMayReadCaptureReport(experiment_, "bob", false);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.message(),
            "exp-000042's capture report is for its owner (alice) and admins; you are bob");
}

TEST_F(CaptureReportsTest, PagesCoverTheFileAndTheLastSaysEof) {
  Keep("0123456789");
  auto first = ReadCaptureReportPage(dir_, experiment_, 0, /*page_bytes=*/4);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->data(), "0123");
  EXPECT_FALSE(first->eof());
  EXPECT_EQ(first->report().file_name(), "exp-000042.ncu-rep");
  auto last = ReadCaptureReportPage(dir_, experiment_, 8, 4);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->data(), "89");
  EXPECT_TRUE(last->eof());
  EXPECT_EQ(ReadCaptureReportPage(dir_, experiment_, 11, 4).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(CaptureReportsTest, NoReportSaysWhy) {
  v1::Experiment plain = experiment_;
  plain.mutable_request()->clear_capture();
  EXPECT_EQ(ReadCaptureReportPage(dir_, plain, 0).status().message(),
            "exp-000042 was not submitted with a capture (gpuprof submit ... --capture "
            "ncu|nsys)");
  experiment_.set_state(v1::FAILED);
  experiment_.set_reason("index: the capture under ncu failed: ncu wrote no report");
  const absl::Status failed = ReadCaptureReportPage(dir_, experiment_, 0).status();
  EXPECT_EQ(failed.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(failed.message(),
            "exp-000042 left no ncu report (it ended FAILED: index: the capture under ncu "
            "failed: ncu wrote no report)");
  experiment_.set_state(v1::RUNNING);
  EXPECT_EQ(ReadCaptureReportPage(dir_, experiment_, 0).status().message(),
            "exp-000042 is RUNNING; its report comes once it has finished");
}

TEST_F(CaptureReportsTest, AFileThatChangedOrWentIsDataLoss) {
  Keep("abc");
  experiment_.mutable_result()->mutable_capture_report()->set_size_bytes(4);
  EXPECT_EQ(ReadCaptureReportPage(dir_, experiment_, 0).status().code(),
            absl::StatusCode::kDataLoss);
  std::filesystem::remove(CaptureReportPath(dir_, "exp-000042", v1::NsightCapture::TOOL_NCU));
  EXPECT_EQ(ReadCaptureReportPage(dir_, experiment_, 0).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace gpuprof::daemon
