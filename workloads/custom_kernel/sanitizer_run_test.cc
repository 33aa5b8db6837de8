#include "workloads/custom_kernel/sanitizer_run.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/worker_protocol/worker_protocol.pb.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// As compute-sanitizer 2025 prints them (a kernel built with -lineinfo).
constexpr absl::string_view kMemcheckReport = R"(========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 2 bytes
=========     at decode_oob+0x1a40 in decode_oob.cu:41
=========     by thread (0,0,0) in block (63,0,0)
=========     Address 0x7f3e2a000800 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3e2a000000 of size 2048 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame:  [0x2d8f1f] in libcuda.so.1
=========
========= Invalid __global__ write of size 2 bytes
=========     at decode_oob+0x1a40 in decode_oob.cu:41
=========     by thread (1,0,0) in block (63,0,0)
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cudaStreamSynchronize.
=========
========= Target application returned an error
========= ERROR SUMMARY: 3 errors
)";

constexpr absl::string_view kRacecheckReport = R"(========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at decode_race+0x2c0 in decode_race.cu:30
=========     and Read access at decode_race+0x310 in decode_race.cu:33 [4 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
========= ERROR SUMMARY: 1 error
)";

TEST(SanitizerRunTest, ToolDefaultsToMemcheckAndRefusesOthers) {
  v1::CustomKernel kernel;
  EXPECT_EQ(*SanitizerToolOf(kernel), "memcheck");
  for (const char* tool : {"memcheck", "racecheck", "initcheck", "synccheck"}) {
    kernel.set_sanitizer_tool(tool);
    EXPECT_EQ(*SanitizerToolOf(kernel), tool);
  }
  kernel.set_sanitizer_tool("leakcheck");
  const absl::StatusOr<std::string> refused = SanitizerToolOf(kernel);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("custom_kernel.sanitizer_tool: got 'leakcheck'; must be one of memcheck, "
                        "racecheck, initcheck, synccheck"));
}

TEST(SanitizerRunTest, LooksInCudaHomeThenTheUsualPlaceThenPath) {
  EXPECT_THAT(ComputeSanitizerCandidates("/opt/cuda-13/", "/usr/bin::/usr/local/cuda/bin"),
              ElementsAre("/opt/cuda-13/compute-sanitizer/compute-sanitizer",
                          "/opt/cuda-13/bin/compute-sanitizer",
                          "/usr/local/cuda/compute-sanitizer/compute-sanitizer",
                          "/usr/local/cuda/bin/compute-sanitizer", "/usr/bin/compute-sanitizer"));
  EXPECT_THAT(ComputeSanitizerCandidates(nullptr, nullptr),
              ElementsAre("/usr/local/cuda/compute-sanitizer/compute-sanitizer",
                          "/usr/local/cuda/bin/compute-sanitizer"));
}

TEST(SanitizerRunTest, FindsTheFirstExecutableOrSaysWhereItLooked) {
  const std::vector<std::string> candidates = {"/a/compute-sanitizer", "/b/compute-sanitizer",
                                               "/c/compute-sanitizer"};
  const std::set<std::string> present = {"/b/compute-sanitizer", "/c/compute-sanitizer"};
  auto exists = [&](const std::string& file) { return present.contains(file); };
  EXPECT_EQ(*FindComputeSanitizer(candidates, exists), "/b/compute-sanitizer");

  const absl::StatusOr<std::string> missing =
      FindComputeSanitizer(candidates, [](const std::string&) { return false; });
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(missing.status().message()),
              StartsWith("compute-sanitizer not found (looked in /a/compute-sanitizer, "
                         "/b/compute-sanitizer, /c/compute-sanitizer)"));
}

TEST(SanitizerRunTest, CountsErrorsAndNamesTheFirst) {
  const SanitizerSummary memcheck = SummarizeSanitizerReport(kMemcheckReport);
  EXPECT_EQ(memcheck.errors, 3);
  EXPECT_EQ(memcheck.first_error,
            "Invalid __global__ write of size 2 bytes; at decode_oob+0x1a40 in decode_oob.cu:41");

  const SanitizerSummary racecheck = SummarizeSanitizerReport(kRacecheckReport);
  EXPECT_EQ(racecheck.errors, 1);
  EXPECT_THAT(racecheck.first_error,
              StartsWith("Error: Race reported between Write access at decode_race+0x2c0"));
}

TEST(SanitizerRunTest, CleanAndUnfinishedReports) {
  const SanitizerSummary clean =
      SummarizeSanitizerReport("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n");
  EXPECT_EQ(clean.errors, 0);
  EXPECT_EQ(clean.first_error, "");
  // Killed before its summary, or it never started.
  EXPECT_EQ(SummarizeSanitizerReport("========= COMPUTE-SANITIZER\n").errors, -1);
  EXPECT_EQ(SummarizeSanitizerReport("").errors, -1);
}

TEST(SanitizerRunTest, CapsLongReportsKeepingHeadAndSummary) {
  std::string report = "========= COMPUTE-SANITIZER\n";
  for (int i = 0; i < 5000; ++i) report += "========= Invalid __global__ write of size 2 bytes\n";
  report += "========= ERROR SUMMARY: 5000 errors\n";
  const std::string capped = CapSanitizerReport(report, 4096);
  EXPECT_LT(capped.size(), 4096u + 100);
  EXPECT_THAT(capped, StartsWith("========= COMPUTE-SANITIZER\n"));
  EXPECT_THAT(capped, HasSubstr("bytes of the report left out"));
  EXPECT_EQ(SummarizeSanitizerReport(capped).errors, 5000);
  EXPECT_EQ(CapSanitizerReport("short", 4096), "short");
}

TEST(SanitizerRunTest, CommandWrapsTheWorkerAndInstrumentsOnlyTheKernel) {
  EXPECT_THAT(SanitizerCommand("/cuda/bin/compute-sanitizer", "racecheck", "my_decode",
                               "/tmp/d/sanitizer.log", "/opt/gpuprof/gpuprof_worker",
                               "/tmp/d/assignment.pb"),
              ElementsAre("/cuda/bin/compute-sanitizer", "--tool", "racecheck", "--kernel-name",
                          "kne=my_decode", "--destroy-on-device-error", "kernel", "--print-limit",
                          "50", "--log-file", "/tmp/d/sanitizer.log", "/opt/gpuprof/gpuprof_worker",
                          "--custom-kernel-check=/tmp/d/assignment.pb"));
}

// ---- The child's side, with a runner of the test's own in place of a workload's. ----

class ScratchFile {
 public:
  ScratchFile() {
    std::string pattern = absl::StrCat(::testing::TempDir(), "/sanitize_test_XXXXXX");
    directory_ = mkdtemp(pattern.data());
  }
  ~ScratchFile() { std::filesystem::remove_all(directory_); }
  std::string Path(const std::string& name) const { return directory_ + "/" + name; }

 private:
  std::string directory_;
};

std::string Read(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

worker_protocol::ExperimentAssignment SanitizeAssignment() {
  worker_protocol::ExperimentAssignment assignment;
  assignment.set_experiment_id("exp-1");
  v1::CustomKernel& kernel = *assignment.mutable_request()->mutable_custom_kernel();
  kernel.set_kernel_name("decode_paged");
  kernel.set_mode(v1::CustomKernel::MODE_SANITIZE);
  assignment.mutable_request()->mutable_attention()->set_batch_size(2);
  return assignment;
}

// What the child's runner saw, for the test to look at.
worker_protocol::ExperimentAssignment* seen_assignment = nullptr;

absl::StatusOr<v1::ExperimentResult> PassingRun(const RunContext& context) {
  *seen_assignment = context.assignment;
  v1::ExperimentResult result;
  result.mutable_verification()->set_passed(true);
  result.mutable_verification()->set_message("all 3 checks on fresh random inputs passed");
  result.mutable_custom_kernel()->set_registers_per_thread(40);
  return result;
}

absl::StatusOr<v1::ExperimentResult> CompileErrorRun(const RunContext&) {
  return absl::InvalidArgumentError("decode.cu(4): error: identifier \"x\" is undefined");
}

TEST(SanitizerRunTest, ChildRunsTheChecksOnlyWithLineInfoAndWritesItsResult) {
  ScratchFile scratch;
  const std::string file = scratch.Path("assignment.pb");
  Write(file, SanitizeAssignment().SerializeAsString());
  worker_protocol::ExperimentAssignment seen;
  seen_assignment = &seen;
  const int exit_status = RunCustomKernelCheckChild(
      file, [](const v1::ExperimentRequest&) -> RunWorkloadFunction { return &PassingRun; });
  EXPECT_EQ(exit_status, 0);
  EXPECT_EQ(seen.request().custom_kernel().mode(), v1::CustomKernel::MODE_TEST);
  EXPECT_THAT(seen.request().custom_kernel().compile_options(), ElementsAre("-lineinfo"));
  v1::ExperimentResult result;
  ASSERT_TRUE(result.ParseFromString(Read(file + ".result")));
  EXPECT_EQ(result.custom_kernel().registers_per_thread(), 40);
  EXPECT_FALSE(std::filesystem::exists(file + ".error"));
}

TEST(SanitizerRunTest, ChildWritesItsFailureWithTheStatusCode) {
  ScratchFile scratch;
  const std::string file = scratch.Path("assignment.pb");
  Write(file, SanitizeAssignment().SerializeAsString());
  EXPECT_EQ(RunCustomKernelCheckChild(file,
                                      [](const v1::ExperimentRequest&) -> RunWorkloadFunction {
                                        return &CompileErrorRun;
                                      }),
            2);
  EXPECT_EQ(Read(file + ".error"),
            absl::StrCat(static_cast<int>(absl::StatusCode::kInvalidArgument),
                         "\ndecode.cu(4): error: identifier \"x\" is undefined"));

  Write(file, "not an assignment");
  EXPECT_EQ(RunCustomKernelCheckChild(
                file, [](const v1::ExperimentRequest&) -> RunWorkloadFunction { return nullptr; }),
            2);
  EXPECT_THAT(Read(file + ".error"), HasSubstr("not a readable assignment"));
}

// ---- The parent's side, with a stand-in compute-sanitizer: a script that writes a report
// and the child's files as the real pair would. The real one runs in tests/e2e on a GPU. ----

class FakeSanitizer {
 public:
  // `report` goes to --log-file; `child_files` runs with $A set to the assignment file.
  FakeSanitizer(const std::string& report, const std::string& child_files) {
    const std::string directory = scratch_.Path("cuda");
    std::filesystem::create_directories(directory + "/bin");
    Write(scratch_.Path("report.txt"), report);
    const std::string script = directory + "/bin/compute-sanitizer";
    Write(script, absl::StrCat("#!/bin/sh\n"
                               "while [ $# -gt 0 ]; do\n"
                               "  case \"$1\" in\n"
                               "    --log-file) log=\"$2\"; shift ;;\n"
                               "    --custom-kernel-check=*) A=\"${1#--custom-kernel-check=}\" ;;\n"
                               "  esac\n"
                               "  shift\n"
                               "done\n"
                               "cp '",
                               scratch_.Path("report.txt"), "' \"$log\"\n", child_files, "\n"));
    chmod(script.c_str(), 0755);
    previous_ = std::getenv("CUDA_HOME") != nullptr ? std::getenv("CUDA_HOME") : "";
    setenv("CUDA_HOME", directory.c_str(), 1);
  }
  ~FakeSanitizer() {
    if (previous_.empty()) {
      unsetenv("CUDA_HOME");
    } else {
      setenv("CUDA_HOME", previous_.c_str(), 1);
    }
  }

 private:
  ScratchFile scratch_;
  std::string previous_;
};

absl::StatusOr<v1::ExperimentResult> RunParent(
    const worker_protocol::ExperimentAssignment& assignment) {
  const RunContext context{.assignment = assignment,
                           .progress = [](v1::Phase, int64_t, int64_t, const std::string&) {},
                           .tracing = nullptr};
  return RunCustomKernelUnderSanitizer(context);
}

TEST(SanitizerRunTest, ParentReturnsTheReportAndFailsTheCheckOnErrors) {
  // The real child would have failed at its synchronise; an empty result parses as empty.
  FakeSanitizer sanitizer(std::string(kMemcheckReport), ": > \"$A.result\"");
  const absl::StatusOr<v1::ExperimentResult> result = RunParent(SanitizeAssignment());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->custom_kernel().sanitizer_errors(), 3);
  EXPECT_EQ(result->custom_kernel().sanitizer_report(), kMemcheckReport);
  EXPECT_FALSE(result->verification().passed());
  EXPECT_THAT(result->verification().message(),
              StartsWith("compute-sanitizer memcheck found 3 errors; the first: Invalid "
                         "__global__ write of size 2 bytes; at decode_oob+0x1a40 in "
                         "decode_oob.cu:41"));
}

TEST(SanitizerRunTest, ParentKeepsTheChildsChecksWhenClean) {
  v1::ExperimentResult child;
  child.mutable_verification()->set_passed(true);
  child.mutable_verification()->set_message("all 3 checks on fresh random inputs passed");
  child.mutable_custom_kernel()->set_kernel_name("decode_paged");
  ScratchFile scratch;
  Write(scratch.Path("child.result"), child.SerializeAsString());
  FakeSanitizer sanitizer("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n",
                          absl::StrCat("cp '", scratch.Path("child.result"), "' \"$A.result\""));
  const absl::StatusOr<v1::ExperimentResult> result = RunParent(SanitizeAssignment());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->custom_kernel().sanitizer_errors(), 0);
  EXPECT_EQ(result->custom_kernel().kernel_name(), "decode_paged");
  EXPECT_TRUE(result->verification().passed());
  EXPECT_EQ(result->verification().message(),
            "compute-sanitizer memcheck found no errors; the checks: all 3 checks on fresh "
            "random inputs passed");
}

TEST(SanitizerRunTest, ParentPassesOnTheChildsCompileError) {
  FakeSanitizer sanitizer(
      "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n",
      "printf '3\\ndecode.cu(4): error: identifier \"x\" is undefined' > \"$A.error\"");
  const absl::StatusOr<v1::ExperimentResult> result = RunParent(SanitizeAssignment());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(result.status().message(), "decode.cu(4): error: identifier \"x\" is undefined");
}

TEST(SanitizerRunTest, ParentSaysWhenTheSanitizerDidNotFinish) {
  FakeSanitizer sanitizer("========= COMPUTE-SANITIZER\n========= Error: Device not supported\n",
                          "exit 1");
  const absl::StatusOr<v1::ExperimentResult> result = RunParent(SanitizeAssignment());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(),
              HasSubstr("compute-sanitizer memcheck did not finish (it exited with status 1)"));
  EXPECT_THAT(result.status().message(), HasSubstr("Device not supported"));
}

TEST(SanitizerRunTest, ParentRefusesAnUnknownToolBeforeLookingForTheSanitizer) {
  worker_protocol::ExperimentAssignment assignment = SanitizeAssignment();
  assignment.mutable_request()->mutable_custom_kernel()->set_sanitizer_tool("leakcheck");
  EXPECT_EQ(RunParent(assignment).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpuprof::workloads
