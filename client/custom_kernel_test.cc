#include "client/custom_kernel.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/request_builder.h"
#include "client/sweep_commands.h"
#include "sweep/sweep_expansion.h"
#include <sstream>
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string WriteFile(const std::string& name, const std::string& bytes) {
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

constexpr char kGather[] = R"cu(#include <gpuprof/contract.h>
// extern "C" __global__ void commented_out(int);
/* extern "C" __global__ void also_commented(int); */
__device__ float helper(float x) { return x; }
extern "C" __global__ void __launch_bounds__(256) my_gather(const gpuprof::IndexParams p) {
  const char* s = "extern \"C\" __global__ void in_a_string(";
}
)cu";

TEST(ExternCGlobalFunctions, FindsTheKernelsButNotCommentsStringsOrDeviceFunctions) {
  EXPECT_THAT(ExternCGlobalFunctions(kGather), ElementsAre("my_gather"));
  EXPECT_THAT(ExternCGlobalFunctions(R"(extern "C" {
    __global__ void a(int x) { if (x) { return; } }
    __device__ int not_a_kernel(int);
    __global__ void b(int) {}
  }
  extern "C" __global__ void c(float* out);
  __global__ void not_extern_c(int);
  extern "C" __device__ void d(int);)"),
              ElementsAre("a", "b", "c"));
  EXPECT_THAT(ExternCGlobalFunctions("__global__ void k() {}"), IsEmpty());
}

TEST(ExternCGlobalFunctions, EachWorkedExampleHasOneKernel) {
  const std::vector<std::pair<std::string, std::string>> examples = {
      {"index_gather.cu", "index_gather"},
      {"index_builtin_gather.cu", "builtin_gather"},
      {"store_scatter.cu", "store_scatter"},
      {"decode_paged.cu", "decode_paged"}};
  for (const auto& [file, kernel] : examples) {
    absl::StatusOr<std::string> source =
        ReadKernelFile(absl::StrCat("examples/custom_kernels/", file));
    ASSERT_TRUE(source.ok()) << source.status();
    EXPECT_THAT(ExternCGlobalFunctions(*source), ElementsAre(kernel)) << file;
  }
}

TEST(ChooseKernelName, TheOnlyKernelOrTheOneNamedElseTheCandidates) {
  EXPECT_EQ(*ChooseKernelName(kGather, "g.cu", std::nullopt), "my_gather");
  const std::string two = R"(extern "C" __global__ void a() {} extern "C" __global__ void b() {})";
  EXPECT_EQ(*ChooseKernelName(two, "two.cu", "b"), "b");
  EXPECT_THAT(ChooseKernelName(two, "two.cu", std::nullopt).status().message(),
              HasSubstr("two.cu declares 2 extern \"C\" __global__ functions (a, b): choose one "
                        "with --kernel-name"));
  EXPECT_THAT(ChooseKernelName(two, "two.cu", "c").status().message(),
              HasSubstr("--kernel-name c: two.cu has no extern \"C\" __global__ function of that "
                        "name (it has a, b)"));
  EXPECT_THAT(ChooseKernelName("__global__ void k() {}", "k.cu", std::nullopt).status().message(),
              HasSubstr("k.cu declares no extern \"C\" __global__ function"));
}

TEST(ReadKernelFile, RefusesMissingEmptyDirectoriesAndOversizedFiles) {
  const std::string ok = WriteFile("ok.cu", kGather);
  EXPECT_EQ(*ReadKernelFile(ok), kGather);
  EXPECT_THAT(ReadKernelFile(ok + ".missing").status().message(),
              HasSubstr("No such file or directory"));
  EXPECT_THAT(ReadKernelFile(std::getenv("TEST_TMPDIR")).status().message(),
              HasSubstr("not a regular file"));
  EXPECT_THAT(ReadKernelFile(WriteFile("empty.cu", "")).status().message(),
              HasSubstr("the file is empty"));
  const std::string at_limit = WriteFile("limit.cu", std::string(kMaxKernelFileBytes, ' '));
  EXPECT_TRUE(ReadKernelFile(at_limit).ok());
  const std::string over = WriteFile("big.cu", std::string(kMaxKernelFileBytes + 1, ' '));
  EXPECT_THAT(ReadKernelFile(over).status().message(),
              HasSubstr("262145 bytes, over the 256 KiB a kernel source may have"));
}

absl::StatusOr<v1::ExperimentRequest> Submit(const std::string& workload,
                                             const std::vector<std::string>& words) {
  absl::StatusOr<ExperimentRequestBuilder> builder = ExperimentRequestBuilder::ForWorkload(workload);
  if (!builder.ok()) return builder.status();
  if (absl::Status refused = RefuseCustomKernelFlags(*builder, words); !refused.ok()) {
    return refused;
  }
  std::vector<FlagSpec> flags = builder->workload_flags();
  for (const auto& group : {builder->custom_kernel_flags(), builder->common_flags()}) {
    flags.insert(flags.end(), group.begin(), group.end());
  }
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(words, flags);
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<v1::ExperimentRequest> request = builder->Build(*parsed);
  if (!request.ok()) return request.status();
  if (absl::Status kernel = ApplyKernelFile(*builder, *parsed, *request); !kernel.ok()) {
    return kernel;
  }
  return request;
}

TEST(ApplyKernelFile, FillsTheCustomKernelFromTheFlags) {
  const std::string path = WriteFile("my_gather.cu", kGather);
  absl::StatusOr<v1::ExperimentRequest> request =
      Submit("index", {"--kernel-file", path, "--block-threads", "128", "--items-per-block", "4",
                       "--dynamic-shared", "48K", "--kernel-option", "-lineinfo",
                       "--kernel-option=--use_fast_math", "--mode", "sanitize", "--sanitizer",
                       "racecheck", "--hidden", "7168"});
  ASSERT_TRUE(request.ok()) << request.status();
  const v1::CustomKernel& kernel = request->custom_kernel();
  EXPECT_EQ(kernel.source(), kGather);
  EXPECT_EQ(kernel.file_name(), "my_gather.cu");
  EXPECT_EQ(kernel.kernel_name(), "my_gather");
  EXPECT_EQ(kernel.block_threads(), 128);
  EXPECT_EQ(kernel.items_per_block(), 4);
  EXPECT_EQ(kernel.dynamic_shared_bytes(), 48 * 1024);
  EXPECT_THAT(kernel.compile_options(), ElementsAre("-lineinfo", "--use_fast_math"));
  EXPECT_EQ(kernel.mode(), v1::CustomKernel::MODE_SANITIZE);
  EXPECT_EQ(kernel.sanitizer_tool(), "racecheck");
  EXPECT_EQ(request->index().hidden_dim(), 7168);
  // Without kernel flags, no custom kernel.
  EXPECT_FALSE(Submit("index", {"--hidden", "7168"})->has_custom_kernel());
}

TEST(ApplyKernelFile, RefusesFlagsThatDoNotGoTogether) {
  const std::string path = WriteFile("my_gather.cu", kGather);
  EXPECT_THAT(Submit("radix", {"--kernel-file", path}).status().message(),
              HasSubstr("--kernel-file: radix takes no custom kernel"));
  EXPECT_THAT(Submit("copy", {"--mode=test"}).status().message(),
              HasSubstr("--mode: copy takes no custom kernel"));
  EXPECT_THAT(Submit("store", {"--block-threads", "64"}).status().message(),
              HasSubstr("--block-threads is about a kernel of your own: give its source with "
                        "--kernel-file PATH"));
  EXPECT_THAT(Submit("index", {"--kernel-file", path, "--sanitizer", "memcheck"}).status().message(),
              HasSubstr("--sanitizer memcheck needs --mode sanitize"));
  EXPECT_THAT(Submit("attention", {"--phase", "prefill", "--kernel-file", path}).status().message(),
              HasSubstr("decode phase only"));
  EXPECT_THAT(Submit("index", {"--kernel-file", path + "x"}).status().message(),
              HasSubstr("No such file"));
  EXPECT_THAT(Submit("index", {"--kernel-file", absl::StrCat(path, ",", path)}).status().message(),
              HasSubstr("submit runs one kernel"));
  EXPECT_THAT(Submit("index", {"--kernel-file", path, "--mode", "fast"}).status().message(),
              HasSubstr("--mode"));
  EXPECT_THAT(Submit("index", {"--kernel-file", path, "--kernel-option", "-I/etc"}).status().message(),
              HasSubstr("--kernel-option: "));
  EXPECT_TRUE(Submit("index", {"--kernel-file", path, "--kernel-option", "-maxrregcount=64",
                               "--kernel-option", "-DTILE=4"})
                  .ok());
}

TEST(KernelSweepAxis, OneSourcePerPointAndOursAsAPoint) {
  const std::string a = WriteFile("a.cu", kGather);
  const std::string b = WriteFile("b.cu", R"(extern "C" __global__ void other() {})");
  absl::StatusOr<v1::SweepAxis> axis = KernelSweepAxis({"ours", a, b}, std::nullopt);
  ASSERT_TRUE(axis.ok()) << axis.status();
  EXPECT_EQ(axis->field(), "kernel");
  EXPECT_THAT(axis->values(), ElementsAre("ours", "a.cu", "b.cu"));
  ASSERT_EQ(axis->kernels_size(), 3);
  EXPECT_TRUE(axis->kernels(0).source().empty());
  EXPECT_EQ(axis->kernels(1).kernel_name(), "my_gather");
  EXPECT_EQ(axis->kernels(2).kernel_name(), "other");
  EXPECT_THAT(KernelSweepAxis({a, a}, std::nullopt).status().message(),
              HasSubstr("a.cu is in the list twice"));
  EXPECT_THAT(KernelSweepAxis({a}, std::nullopt).status().message(), HasSubstr("two or more"));
}

TEST(ParseSweepSubmission, KernelFilesAreAnAxisWhosePointsEachCarryOneSource) {
  const std::string a = WriteFile("a.cu", kGather);
  const std::string b = WriteFile("b.cu", R"(extern "C" __global__ void other() {})");
  std::ostringstream out, err;
  ClientEnvironment env;
  env.out = &out;
  env.err = &err;
  int exit_code = -1;
  std::optional<SweepSubmission> submission = ParseSweepSubmission(
      {"index", "--kernel-file", absl::StrCat("ours,", a, ",", b), "--tokens", "1,64",
       "--block-threads", "128"},
      env, std::nullopt, exit_code);
  ASSERT_TRUE(submission.has_value()) << err.str();
  const v1::SweepRequest& request = submission->request;
  ASSERT_EQ(request.axes_size(), 2);
  EXPECT_EQ(request.axes(0).field(), "kernel");
  EXPECT_EQ(request.base().custom_kernel().block_threads(), 128);
  EXPECT_TRUE(request.base().custom_kernel().source().empty());
  absl::StatusOr<std::vector<sweep::ExpandedPoint>> points = sweep::ExpandSweep(request);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 6u);
  EXPECT_EQ(sweep::DescribeParameters((*points)[0].parameters), "kernel=ours, num_tokens=1");
  EXPECT_FALSE((*points)[0].request.has_custom_kernel());
  EXPECT_EQ(sweep::DescribeParameters((*points)[3].parameters), "kernel=a.cu, num_tokens=64");
  EXPECT_EQ((*points)[3].request.custom_kernel().source(), kGather);
  EXPECT_EQ((*points)[3].request.custom_kernel().block_threads(), 128);
  EXPECT_EQ((*points)[5].request.custom_kernel().kernel_name(), "other");

  // One file: every point runs it.
  submission = ParseSweepSubmission({"index", "--kernel-file", a, "--tokens", "1,64"}, env,
                                    std::nullopt, exit_code);
  ASSERT_TRUE(submission.has_value()) << err.str();
  EXPECT_EQ(submission->request.base().custom_kernel().source(), kGather);
  EXPECT_EQ(submission->request.axes_size(), 1);
  // Refused before any RPC.
  EXPECT_FALSE(ParseSweepSubmission({"radix", "--kernel-file", absl::StrCat(a, ",", b)}, env,
                                    std::nullopt, exit_code)
                   .has_value());
  EXPECT_EQ(exit_code, 2);
  EXPECT_THAT(err.str(), HasSubstr("radix takes no custom kernel"));
}

TEST(KernelDidNotCompile, KnownByTheReasonOrByALogWithoutRegisters) {
  v1::ExperimentResult none;
  EXPECT_TRUE(KernelDidNotCompile(v1::FAILED, "compile failed: my_gather.cu(3): error", none));
  EXPECT_FALSE(KernelDidNotCompile(v1::FINISHED, "compile", none));
  EXPECT_FALSE(KernelDidNotCompile(v1::FAILED, "illegal address", none));
  // As the worker passes the compiler's message on.
  EXPECT_TRUE(KernelDidNotCompile(
      v1::FAILED, "index: INVALID_ARGUMENT: my_gather.cu(12): error: identifier \"x\" is undefined",
      none));
  EXPECT_TRUE(KernelDidNotCompile(v1::FAILED, "store: INVALID_ARGUMENT: k.cu(1): catastrophic "
                                  "error: cannot open source file \"cub/cub.cuh\"", none));
  EXPECT_FALSE(KernelDidNotCompile(v1::FAILED, "check (3): error at row 5", none));
  EXPECT_FALSE(KernelDidNotCompile(v1::FAILED, "(3): error", none));
  v1::ExperimentResult log;
  log.mutable_custom_kernel()->set_compile_log("my_gather.cu(3): error: expected a \";\"\n");
  EXPECT_TRUE(KernelDidNotCompile(v1::FAILED, "the worker said so", log));
  v1::ExperimentResult compiled = log;
  compiled.mutable_custom_kernel()->set_registers_per_thread(32);
  EXPECT_FALSE(KernelDidNotCompile(v1::FAILED, "wrong output", compiled));
  EXPECT_EQ(CompilerMessages("ignored", log), "my_gather.cu(3): error: expected a \";\"\n");
  EXPECT_EQ(CompilerMessages("compile: a.cu(1): error\n\x1b[2Ja.cu(2): note", none),
            "compile: a.cu(1): error\n\\x1b[2Ja.cu(2): note\n");
}

}  // namespace
}  // namespace gpuprof::client
