// Custom kernels through admission's one validation path (ApplyRequestDefaults, then
// ValidateExperimentRequest), as a submitted request takes it.
#include "daemon/admission/custom_kernel_validation.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "daemon/admission/request_validation.h"
#include "daemon/admission/test_inventory.h"
#include "proto/wire/unparsable_request.h"

namespace gpuprof::daemon {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kSource[] =
    "#include <gpuprof/contract.h>\n"
    "extern \"C\" __global__ void my_gather(const gpuprof::IndexParams p) {}\n";

v1::ListGpusResponse Inventory() {
  return TwoNvlinkGpus({"radix", "index", "store", "attention", "collective", "copy"});
}

v1::ExperimentRequest IndexWithKernel() {
  v1::ExperimentRequest request;
  request.set_user("alice");
  request.mutable_index()->set_num_tokens(64);
  v1::CustomKernel& kernel = *request.mutable_custom_kernel();
  kernel.set_source(kSource);
  kernel.set_kernel_name("my_gather");
  return request;
}

absl::Status Check(v1::ExperimentRequest request, ValidationLimits limits = {}) {
  return ApplyDefaultsAndValidate(limits, Inventory(), request);
}

// The request as admission stores it.
v1::ExperimentRequest Admitted(v1::ExperimentRequest request) {
  EXPECT_TRUE(ApplyDefaultsAndValidate({}, Inventory(), request).ok());
  return request;
}

TEST(CustomKernelValidation, ACompleteIndexStoreOrDecodeRequestIsAdmitted) {
  EXPECT_TRUE(Check(IndexWithKernel()).ok()) << Check(IndexWithKernel());
  v1::ExperimentRequest store = IndexWithKernel();
  store.mutable_store()->set_num_tokens(64);
  EXPECT_TRUE(Check(store).ok()) << Check(store);
  v1::ExperimentRequest decode = IndexWithKernel();
  decode.mutable_attention()->set_phase(v1::ATTENTION_PHASE_DECODE);
  EXPECT_TRUE(Check(decode).ok()) << Check(decode);
  // Attention's default phase is decode.
  v1::ExperimentRequest attention = IndexWithKernel();
  attention.mutable_attention();
  EXPECT_TRUE(Check(attention).ok()) << Check(attention);
}

TEST(CustomKernelValidation, OtherWorkloadsAreRefusedNamingTheOnesThatTakeOne) {
  v1::ExperimentRequest collective = IndexWithKernel();
  collective.mutable_collective();
  EXPECT_EQ(Check(collective).message(),
            "custom_kernel: the collective workload takes no custom kernel; custom kernels run "
            "for index, store and attention decode");
  v1::ExperimentRequest prefill = IndexWithKernel();
  prefill.mutable_attention()->set_phase(v1::ATTENTION_PHASE_PREFILL);
  EXPECT_THAT(Check(prefill).message(),
              AllOf(HasSubstr("custom_kernel: attention prefill takes no custom kernel"),
                    HasSubstr("index, store and attention decode")));
  v1::ExperimentRequest radix = IndexWithKernel();
  radix.mutable_radix();
  EXPECT_THAT(Check(radix).message(), HasSubstr("custom_kernel: the radix workload"));
  v1::ExperimentRequest copy = IndexWithKernel();
  copy.mutable_copy();
  EXPECT_THAT(Check(copy).message(), HasSubstr("custom_kernel: the copy workload"));
}

TEST(CustomKernelValidation, ACustomKernelRunsOnOneRank) {
  v1::ExperimentRequest request = IndexWithKernel();
  request.set_tp_degree(2);
  request.mutable_gpus()->set_gpu_count(2);
  const absl::Status status = Check(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "custom_kernel: got tp_degree 2; a custom kernel runs on one GPU (tp_degree 1)");
}

TEST(CustomKernelValidation, TheSourceIsRequiredAndWithinTheDaemonsLimit) {
  v1::ExperimentRequest empty = IndexWithKernel();
  empty.mutable_custom_kernel()->clear_source();
  EXPECT_THAT(Check(empty).message(), HasSubstr("custom_kernel.source: empty"));

  ValidationLimits limits;
  limits.custom_kernel_max_source_bytes = 100;
  v1::ExperimentRequest large = IndexWithKernel();
  large.mutable_custom_kernel()->set_source(std::string(101, 'x'));
  EXPECT_EQ(Check(large, limits).message(),
            "custom_kernel.source: 101 bytes; at most 100 allowed (gpuprofd "
            "--custom_kernel_max_source_bytes)");
  large.mutable_custom_kernel()->set_source(std::string(100, 'x'));
  EXPECT_TRUE(Check(large, limits).ok());

  // The default limit: 256 KiB.
  v1::ExperimentRequest over_default = IndexWithKernel();
  over_default.mutable_custom_kernel()->set_source(std::string((256 << 10) + 1, ' '));
  EXPECT_THAT(Check(over_default).message(), HasSubstr("at most 262144 allowed"));

  v1::ExperimentRequest nul = IndexWithKernel();
  nul.mutable_custom_kernel()->mutable_source()->append(std::string("\0 tail", 6));
  EXPECT_THAT(Check(nul).message(),
              HasSubstr(absl::StrCat("custom_kernel.source: a NUL byte at byte ",
                                     sizeof(kSource) - 1)));
}

TEST(CustomKernelValidation, ASourceThatIsNotUtf8IsRefusedWhenTheRequestIsParsed) {
  // custom_kernel (field 19) { source (field 1): one byte 0xFF }, as a raw client may send it:
  // proto3 strings are UTF-8, so the request does not parse, and the RPC boundary refuses it
  // naming the field (proto/wire/unparsable_request.h) before admission sees it.
  const std::string bytes("\x9a\x01\x03\x0a\x01\xff", 6);
  v1::ExperimentRequest request;
  EXPECT_FALSE(request.ParseFromString(bytes));
  EXPECT_THAT(wire::WhyRequestDoesNotParse(*v1::ExperimentRequest::descriptor(), bytes),
              HasSubstr("custom_kernel.source: byte 0xFF at byte 0 is not UTF-8"));
}

TEST(CustomKernelValidation, FileNameIsAPlainPrintableName) {
  for (const std::string& bad :
       std::vector<std::string>{"../etc/passwd", "dir/k.cu", "..", std::string(256, 'a')}) {
    v1::ExperimentRequest request = IndexWithKernel();
    request.mutable_custom_kernel()->set_file_name(bad);
    EXPECT_THAT(Check(request).message(),
                AllOf(HasSubstr("custom_kernel.file_name: got"),
                      HasSubstr("a plain file name of 1-255 printable bytes, without '/'")))
        << bad;
  }
  v1::ExperimentRequest control = IndexWithKernel();
  control.mutable_custom_kernel()->set_file_name("k\x1b]0;owned\x07.cu");
  EXPECT_THAT(Check(control).message(), HasSubstr("custom_kernel.file_name: U+001B"));
  v1::ExperimentRequest fine = IndexWithKernel();
  fine.mutable_custom_kernel()->set_file_name("my gather (v2).cu");
  EXPECT_TRUE(Check(fine).ok()) << Check(fine);
}

TEST(CustomKernelValidation, KernelNameIsACIdentifier) {
  for (const std::string& bad : std::vector<std::string>{"", "2fast", "my-gather", "my gather",
                                                         "ns::k", std::string(256, 'k')}) {
    v1::ExperimentRequest request = IndexWithKernel();
    request.mutable_custom_kernel()->set_kernel_name(bad);
    EXPECT_THAT(Check(request).message(), HasSubstr("custom_kernel.kernel_name: ")) << bad;
    EXPECT_THAT(Check(request).message(), HasSubstr("extern \"C\" __global__")) << bad;
  }
}

TEST(CustomKernelValidation, LaunchShapeLimits) {
  const auto with = [](auto set) {
    v1::ExperimentRequest request = IndexWithKernel();
    set(*request.mutable_custom_kernel());
    return Check(request);
  };
  for (int threads : {32, 64, 256, 1024}) {
    EXPECT_TRUE(with([&](v1::CustomKernel& k) { k.set_block_threads(threads); }).ok()) << threads;
  }
  for (int threads : {-32, 1, 31, 100, 1056, 2048}) {
    EXPECT_EQ(with([&](v1::CustomKernel& k) { k.set_block_threads(threads); }).message(),
              absl::StrCat("custom_kernel.block_threads: got ", threads,
                           "; must be 0 (256) or a multiple of 32 in [32, 1024] (whole warps, "
                           "at most a block's limit)"));
  }
  EXPECT_TRUE(with([](v1::CustomKernel& k) { k.set_items_per_block(65536); }).ok());
  EXPECT_EQ(with([](v1::CustomKernel& k) { k.set_items_per_block(65537); }).message(),
            "custom_kernel.items_per_block: got 65537; must be 0 (1) or in [1, 65536]");
  EXPECT_THAT(with([](v1::CustomKernel& k) { k.set_items_per_block(-1); }).message(),
              HasSubstr("custom_kernel.items_per_block: got -1"));
  EXPECT_TRUE(with([](v1::CustomKernel& k) { k.set_dynamic_shared_bytes(232448); }).ok());
  EXPECT_THAT(with([](v1::CustomKernel& k) { k.set_dynamic_shared_bytes(232449); }).message(),
              AllOf(HasSubstr("custom_kernel.dynamic_shared_bytes: got 232449; must be in "
                              "[0, 232448]"),
                    HasSubstr("a GPU with less refuses the launch")));
  EXPECT_THAT(with([](v1::CustomKernel& k) { k.set_dynamic_shared_bytes(-4); }).message(),
              HasSubstr("custom_kernel.dynamic_shared_bytes: got -4"));
}

TEST(CustomKernelValidation, CompileOptionsAreTheAllowedOnes) {
  v1::ExperimentRequest fine = IndexWithKernel();
  for (const char* option : {"-lineinfo", "--use_fast_math", "-maxrregcount=64", "-DTILE=4",
                             "-DUSE_LDG"}) {
    fine.mutable_custom_kernel()->add_compile_options(option);
  }
  EXPECT_TRUE(Check(fine).ok()) << Check(fine);
  for (const char* bad : {"-I/etc", "--include-path=/home", "-Xptxas", "-DA;B"}) {
    v1::ExperimentRequest request = IndexWithKernel();
    request.mutable_custom_kernel()->add_compile_options(bad);
    const absl::Status status = Check(request);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(status.message(), HasSubstr("custom_kernel.compile_options[0]: ")) << bad;
  }
  v1::ExperimentRequest many = IndexWithKernel();
  for (int i = 0; i < 33; ++i) many.mutable_custom_kernel()->add_compile_options("-DX");
  EXPECT_EQ(Check(many).message(),
            "custom_kernel.compile_options: got 33 options; at most 32 allowed");
  v1::ExperimentRequest named = IndexWithKernel();
  named.mutable_custom_kernel()->add_compile_options("-lineinfo");
  named.mutable_custom_kernel()->add_compile_options("-I/etc");
  EXPECT_EQ(Check(named).message(),
            "custom_kernel.compile_options[1]: got \"-I/etc\" (6 bytes); allowed: -lineinfo, "
            "--use_fast_math, -maxrregcount=N (N from 16 to 255), -DNAME or -DNAME=VALUE (NAME "
            "a C identifier, VALUE of letters, digits and _ . + -)");
  v1::ExperimentRequest control = IndexWithKernel();
  control.mutable_custom_kernel()->add_compile_options("-lineinfo");
  control.mutable_custom_kernel()->add_compile_options("-DX=\x1b[2J");
  EXPECT_THAT(Check(control).message(), HasSubstr("custom_kernel.compile_options[1]: U+001B"));
}

TEST(CustomKernelValidation, ModeAndSanitizerTool) {
  v1::ExperimentRequest unknown = IndexWithKernel();
  unknown.mutable_custom_kernel()->set_mode(static_cast<v1::CustomKernel::Mode>(9));
  EXPECT_THAT(Check(unknown).message(),
              AllOf(HasSubstr("custom_kernel.mode: got 9"), HasSubstr("MODE_SANITIZE")));

  v1::ExperimentRequest sanitize = IndexWithKernel();
  sanitize.mutable_custom_kernel()->set_mode(v1::CustomKernel::MODE_SANITIZE);
  for (const char* tool : {"memcheck", "racecheck", "initcheck", "synccheck"}) {
    sanitize.mutable_custom_kernel()->set_sanitizer_tool(tool);
    EXPECT_TRUE(Check(sanitize).ok()) << tool;
  }
  sanitize.mutable_custom_kernel()->set_sanitizer_tool("leakcheck");
  EXPECT_THAT(Check(sanitize).message(),
              HasSubstr("custom_kernel.sanitizer_tool: got \"leakcheck\" (9 bytes); must be "
                        "one of memcheck (the default), racecheck, initcheck, synccheck"));

  v1::ExperimentRequest benchmark = IndexWithKernel();
  benchmark.mutable_custom_kernel()->set_sanitizer_tool("racecheck");
  EXPECT_THAT(Check(benchmark).message(),
              HasSubstr("custom_kernel.sanitizer_tool: got \"racecheck\" (9 bytes) with mode "
                        "MODE_BENCHMARK; a sanitizer runs only with MODE_SANITIZE"));
}

TEST(CustomKernelValidation, DefaultsAreTheDocumentedOnes) {
  const v1::ExperimentRequest admitted = Admitted(IndexWithKernel());
  const v1::CustomKernel& kernel = admitted.custom_kernel();
  EXPECT_EQ(kernel.block_threads(), 256);
  EXPECT_EQ(kernel.items_per_block(), 1);
  EXPECT_EQ(kernel.file_name(), "kernel.cu");
  EXPECT_EQ(kernel.mode(), v1::CustomKernel::MODE_BENCHMARK);
  EXPECT_EQ(kernel.sanitizer_tool(), "");
  EXPECT_EQ(kernel.source(), kSource);
  EXPECT_EQ(admitted.tracing().level(), v1::TracingOptions::LEVEL_ACTIVITY);

  v1::ExperimentRequest sanitize = IndexWithKernel();
  sanitize.mutable_custom_kernel()->set_mode(v1::CustomKernel::MODE_SANITIZE);
  EXPECT_EQ(Admitted(sanitize).custom_kernel().sanitizer_tool(), "memcheck");

  // Profiling traces at LEVEL_FULL (PC sampling), unless the request chose a level.
  v1::ExperimentRequest profile = IndexWithKernel();
  profile.mutable_custom_kernel()->set_mode(v1::CustomKernel::MODE_PROFILE);
  EXPECT_EQ(Admitted(profile).tracing().level(), v1::TracingOptions::LEVEL_FULL);
  profile.mutable_tracing()->set_level(v1::TracingOptions::LEVEL_METRICS);
  EXPECT_EQ(Admitted(profile).tracing().level(), v1::TracingOptions::LEVEL_METRICS);

  // Explicit values stay; applying the defaults twice changes nothing.
  v1::ExperimentRequest explicit_values = IndexWithKernel();
  explicit_values.mutable_custom_kernel()->set_block_threads(128);
  explicit_values.mutable_custom_kernel()->set_items_per_block(4);
  explicit_values.mutable_custom_kernel()->set_file_name("my_gather.cu");
  const v1::ExperimentRequest once = Admitted(explicit_values);
  EXPECT_EQ(once.custom_kernel().block_threads(), 128);
  EXPECT_EQ(once.custom_kernel().items_per_block(), 4);
  EXPECT_EQ(once.custom_kernel().file_name(), "my_gather.cu");
  v1::ExperimentRequest twice = once;
  ApplyRequestDefaults({}, Inventory(), twice);
  EXPECT_EQ(twice.SerializeAsString(), once.SerializeAsString());

  // A request without a custom kernel gets none.
  v1::ExperimentRequest ours = IndexWithKernel();
  ours.clear_custom_kernel();
  EXPECT_FALSE(Admitted(ours).has_custom_kernel());
}

}  // namespace
}  // namespace gpuprof::daemon
