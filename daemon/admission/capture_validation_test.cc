// Captures through admission's one validation path (ApplyRequestDefaults, then
// ValidateExperimentRequest), as a submitted request takes it, and who the policy lets ask.
#include "daemon/admission/capture_validation.h"

#include <gtest/gtest.h>

#include "daemon/admission/access_policy.h"
#include "daemon/admission/request_validation.h"
#include "daemon/admission/test_inventory.h"

namespace gpuprof::daemon {
namespace {

v1::ListGpusResponse Inventory() {
  return TwoNvlinkGpus({"radix", "index", "store", "attention", "collective", "copy"});
}

// ncu found, nsys not.
ValidationLimits Limits() {
  ValidationLimits limits;
  limits.capture_tools.ncu.path = "/usr/local/cuda/bin/ncu";
  limits.capture_tools.ncu.version = "Version 2025.3.1.0";
  limits.capture_tools.ncu.sets = {"basic", "detailed", "full", "roofline"};
  limits.capture_tools.nsys.flag = "--nsys_path";
  limits.capture_tools.nsys.looked_in = {"/usr/bin/nsys", "/usr/local/cuda/bin/nsys"};
  return limits;
}

v1::ExperimentRequest IndexUnder(v1::NsightCapture::Tool tool) {
  v1::ExperimentRequest request;
  request.set_user("alice");
  request.mutable_index()->set_num_tokens(4096);
  request.mutable_capture()->set_tool(tool);
  return request;
}

absl::Status Check(v1::ExperimentRequest request) {
  return ApplyDefaultsAndValidate(Limits(), Inventory(), request);
}

TEST(CaptureValidation, NcuOfAnIndexExperimentIsAdmittedWithItsDefaults) {
  v1::ExperimentRequest request = IndexUnder(v1::NsightCapture::TOOL_NCU);
  ASSERT_TRUE(ApplyDefaultsAndValidate(Limits(), Inventory(), request).ok());
  EXPECT_EQ(request.capture().ncu_set(), "basic");
  EXPECT_EQ(request.capture().launch_count(), 1);
  EXPECT_EQ(request.capture().kernel_filter(), "");
}

TEST(CaptureValidation, AToolNotInstalledIsRefusedNamingWhereItWasLookedFor) {
  const absl::Status refused = Check(IndexUnder(v1::NsightCapture::TOOL_NSYS));
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message(),
            "capture.tool: nsys is not installed on this node (looked in /usr/bin/nsys, "
            "/usr/local/cuda/bin/nsys); install NVIDIA Nsight Systems or start gpuprofd with "
            "--nsys_path=FILE");
}

TEST(CaptureValidation, OptionsOutOfRangeAreRefusedNamingTheField) {
  v1::ExperimentRequest many = IndexUnder(v1::NsightCapture::TOOL_NCU);
  many.mutable_capture()->set_launch_count(500);
  EXPECT_EQ(Check(many).message(),
            "capture.launch_count: got 500; must be in [0, 50] (0: 1; every profiled launch is "
            "replayed once per counter pass)");
  v1::ExperimentRequest set = IndexUnder(v1::NsightCapture::TOOL_NCU);
  set.mutable_capture()->set_ncu_set("full; rm -rf /");
  EXPECT_EQ(Check(set).code(), absl::StatusCode::kInvalidArgument);
  v1::ExperimentRequest skip = IndexUnder(v1::NsightCapture::TOOL_NCU);
  skip.mutable_capture()->set_launch_skip(-1);
  EXPECT_EQ(Check(skip).message(), "capture.launch_skip: got -1; must be in [0, 1000000]");
  v1::ExperimentRequest filter = IndexUnder(v1::NsightCapture::TOOL_NCU);
  filter.mutable_capture()->set_kernel_filter("regex:\x1b]0;x\x07");
  EXPECT_EQ(Check(filter).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CaptureValidation, ASetThisNodesNcuDoesNotHaveIsRefusedNamingItsSets) {
  v1::ExperimentRequest typo = IndexUnder(v1::NsightCapture::TOOL_NCU);
  typo.mutable_capture()->set_ncu_set("ful");
  const absl::Status refused = Check(typo);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            "capture.ncu_set: got \"ful\"; this node's ncu (Version 2025.3.1.0) has basic, "
            "detailed, full, roofline (`ncu --list-sets`)");
  v1::ExperimentRequest full = IndexUnder(v1::NsightCapture::TOOL_NCU);
  full.mutable_capture()->set_ncu_set("full");
  EXPECT_TRUE(Check(full).ok());
  // Sets not known (the list could not be read): any well-formed name goes to ncu.
  ValidationLimits unknown = Limits();
  unknown.capture_tools.ncu.sets.clear();
  EXPECT_TRUE(ApplyDefaultsAndValidate(unknown, Inventory(), typo).ok());
}

TEST(CaptureValidation, NcuOptionsWithoutNcuAreRefused) {
  v1::ExperimentRequest no_tool = IndexUnder(v1::NsightCapture::TOOL_UNSPECIFIED);
  no_tool.mutable_capture()->set_ncu_set("full");
  EXPECT_EQ(Check(no_tool).message(),
            "capture.tool: not set, but the capture's ncu options are; must be ncu or nsys");
  ValidationLimits limits = Limits();
  limits.capture_tools.nsys.path = "/usr/bin/nsys";
  v1::ExperimentRequest nsys = IndexUnder(v1::NsightCapture::TOOL_NSYS);
  nsys.mutable_capture()->set_launch_count(3);
  EXPECT_EQ(ApplyDefaultsAndValidate(limits, Inventory(), nsys).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CaptureValidation, NcuNeedsAGpuWorkloadInOneProcess) {
  v1::ExperimentRequest radix;
  radix.set_user("alice");
  radix.mutable_radix();
  radix.mutable_capture()->set_tool(v1::NsightCapture::TOOL_NCU);
  EXPECT_EQ(Check(radix).message(),
            "capture.tool: ncu profiles GPU kernels and radix runs on the CPU; nsys records a "
            "CPU workload's timeline");
  v1::ExperimentRequest ranks = IndexUnder(v1::NsightCapture::TOOL_NCU);
  ranks.set_tp_degree(2);
  ranks.mutable_gpus()->set_gpu_count(2);
  EXPECT_EQ(Check(ranks).message(),
            "capture: runs the experiment in one worker process under ncu; tp_degree is 2, one "
            "process per rank (capture with --tp 1)");
}

TEST(CaptureValidation, ThePolicyLetsAdminsAndTheNamedCapture) {
  v1::AccessPolicy policy;
  EXPECT_TRUE(DecideCaptures(policy, "root", {}, /*admin=*/true).allowed);
  EXPECT_FALSE(DecideCaptures(policy, "alice", {}, false).allowed);
  policy.add_capture_users("alice");
  policy.add_capture_groups("perf");
  EXPECT_EQ(DecideCaptures(policy, "alice", {}, false).reason, "listed in capture_users");
  EXPECT_EQ(DecideCaptures(policy, "bob", {"perf"}, false).reason,
            "member of group perf (capture_groups)");
  EXPECT_FALSE(DecideCaptures(policy, "carol", {"users"}, false).allowed);
  policy.set_captures_for_everyone(true);
  EXPECT_EQ(DecideCaptures(policy, "carol", {}, false).reason, "captures_for_everyone");
}

}  // namespace
}  // namespace gpuprof::daemon
