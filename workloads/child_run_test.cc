#include "workloads/child_run.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <optional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace gpuprof::workloads {
namespace {

using ::testing::HasSubstr;

TEST(ScratchDirectoryTest, IsRemovedWithWhatItHolds) {
  std::string path;
  {
    absl::StatusOr<ScratchDirectory> scratch = ScratchDirectory::Create("child-run-test");
    ASSERT_TRUE(scratch.ok()) << scratch.status();
    path = scratch->path();
    EXPECT_THAT(path, HasSubstr("/child-run-test-"));
    ASSERT_TRUE(WriteWholeFile(scratch->File("a"), "bytes"));
    EXPECT_EQ(ReadWholeFile(scratch->File("a")).value_or(""), "bytes");
    ScratchDirectory moved = std::move(*scratch);  // only the new owner removes it
    EXPECT_TRUE(std::filesystem::exists(path));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(ReadWholeFile(path + "/a").has_value());
}

TEST(ChildRunTest, TailKeepsTheEnd) {
  EXPECT_EQ(TailOf("short", 10), "short");
  EXPECT_EQ(TailOf("0123456789", 3), "...789");
}

TEST(ChildRunTest, StartChildCapturesOutputAndExitStatusWithOnlyStandardDescriptors) {
  absl::StatusOr<ScratchDirectory> scratch = ScratchDirectory::Create("child-run-test");
  ASSERT_TRUE(scratch.ok());
  // A descriptor of ours without O_CLOEXEC: the child must not see it.
  const int leaked = open("/dev/null", O_RDONLY);
  ASSERT_GE(leaked, 3);
  const std::string output = scratch->File("out");
  absl::StatusOr<pid_t> pid = StartChild(
      {"/bin/sh", "-c",
       absl::StrCat("echo to-stdout; echo to-stderr >&2; read line || echo stdin-empty; "
                    "[ -e /proc/self/fd/",
                    leaked, " ] && echo fd-leaked; exit 3")},
      output);
  close(leaked);
  ASSERT_TRUE(pid.ok()) << pid.status();
  absl::StatusOr<int> status = WaitForChild(*pid);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(DescribeWaitStatus(*status), "exited with status 3");
  const std::string printed = ReadWholeFile(output).value_or("");
  EXPECT_THAT(printed, HasSubstr("to-stdout\nto-stderr\nstdin-empty\n"));
  EXPECT_THAT(printed, ::testing::Not(HasSubstr("fd-leaked")));
}

TEST(ChildRunTest, AnExecThatFailsSaysSo) {
  absl::StatusOr<ScratchDirectory> scratch = ScratchDirectory::Create("child-run-test");
  ASSERT_TRUE(scratch.ok());
  absl::StatusOr<pid_t> pid = StartChild({"/nonexistent/tool", "--flag"}, scratch->File("out"));
  ASSERT_TRUE(pid.ok());
  absl::StatusOr<int> status = WaitForChild(*pid);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(DescribeWaitStatus(*status), "exited with status 127");
  EXPECT_THAT(ReadWholeFile(scratch->File("out")).value_or(""),
              HasSubstr("exec of /nonexistent/tool failed"));
  EXPECT_FALSE(StartChild({}, scratch->File("out")).ok());
}

TEST(ChildRunTest, DescribesASignal) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    pause();
    _exit(0);
  }
  kill(pid, SIGKILL);
  absl::StatusOr<int> status = WaitForChild(pid);
  ASSERT_TRUE(status.ok());
  EXPECT_THAT(DescribeWaitStatus(*status), HasSubstr("was killed by signal 9"));
}

// The child's side and the parent's reading of it, round trip, in this process.
class AssignmentInChildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ScratchDirectory> created = ScratchDirectory::Create("child-run-test");
    ASSERT_TRUE(created.ok());
    scratch_.emplace(std::move(*created));
    assignment_file_ = scratch_->File("assignment.pb");
    worker_protocol::ExperimentAssignment assignment;
    assignment.set_experiment_id("exp-000007");
    assignment.mutable_request()->mutable_radix()->set_num_requests(10);
    ASSERT_TRUE(WriteWholeFile(assignment_file_, assignment.SerializeAsString()));
  }

  std::optional<ScratchDirectory> scratch_;
  std::string assignment_file_;
};

// What the runner saw (RunWorkloadFunction is a plain function pointer).
std::string seen_experiment_id;

absl::StatusOr<v1::ExperimentResult> RecordAndPass(const RunContext& context) {
  seen_experiment_id = context.assignment.experiment_id();
  v1::ExperimentResult result;
  result.mutable_verification()->set_passed(true);
  result.mutable_verification()->set_message("checked");
  return result;
}

TEST_F(AssignmentInChildTest, AResultTravelsBack) {
  int32_t seen_requests = 0;
  const FindRunnerFunction find = [&](const v1::ExperimentRequest& request) {
    seen_requests = request.radix().num_requests();
    return &RecordAndPass;
  };
  auto adjust = [](worker_protocol::ExperimentAssignment& assignment) {
    assignment.mutable_request()->mutable_radix()->set_num_requests(20);
  };
  absl::StatusOr<v1::ExperimentResult> ran =
      RunAssignmentInChild(assignment_file_, "test", adjust, find);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(seen_experiment_id, "exp-000007");
  EXPECT_EQ(seen_requests, 20);  // the adjusted assignment
  const ChildOutcome outcome = ReadChildOutcome(assignment_file_);
  EXPECT_FALSE(outcome.error.has_value());
  ASSERT_TRUE(outcome.result.has_value());
  EXPECT_EQ(outcome.result->verification().message(), "checked");
}

TEST_F(AssignmentInChildTest, AFailureTravelsBackWithItsCode) {
  const FindRunnerFunction find = [](const v1::ExperimentRequest&) -> RunWorkloadFunction {
    return [](const RunContext&) -> absl::StatusOr<v1::ExperimentResult> {
      return absl::ResourceExhaustedError("out of device memory\nsecond line");
    };
  };
  EXPECT_FALSE(RunAssignmentInChild(assignment_file_, "test", nullptr, find).ok());
  const ChildOutcome outcome = ReadChildOutcome(assignment_file_);
  EXPECT_FALSE(outcome.result.has_value());
  ASSERT_TRUE(outcome.error.has_value());
  EXPECT_EQ(outcome.error->code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(outcome.error->message(), "out of device memory\nsecond line");
}

TEST_F(AssignmentInChildTest, NoRunnerOrNoAssignmentIsAnError) {
  const FindRunnerFunction none = [](const v1::ExperimentRequest&) -> RunWorkloadFunction {
    return nullptr;
  };
  EXPECT_EQ(RunAssignmentInChild(assignment_file_, "test", nullptr, none).status().code(),
            absl::StatusCode::kUnimplemented);
  const std::string missing = scratch_->File("missing.pb");
  EXPECT_EQ(RunAssignmentInChild(missing, "test", nullptr, none).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadChildOutcome(missing).error->code(), absl::StatusCode::kInvalidArgument);
  // A file that is not an error's encoding reads as UNKNOWN with its text.
  ASSERT_TRUE(WriteWholeFile(scratch_->File("x.pb.error"), "garbage"));
  EXPECT_EQ(ReadChildOutcome(scratch_->File("x.pb")).error->code(), absl::StatusCode::kUnknown);
  EXPECT_FALSE(ReadChildOutcome(scratch_->File("nothing.pb")).error.has_value());
}

}  // namespace
}  // namespace gpuprof::workloads
