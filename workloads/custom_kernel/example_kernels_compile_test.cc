// The example kernels and the e2e test's broken ones compile (or, for the ones meant not to,
// fail with the compiler's file(line) message) as the worker compiles them: the contract
// header, the launch shape's and the contract's macros. Needs no GPU.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/custom/user_kernel_compile.h"
#include "kernels/jit/jit_cache.h"
#include "workloads/custom_kernel/custom_kernel_plan.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;
using ::testing::HasSubstr;

struct Example {
  std::string path;
  std::string kernel_name;
  std::string contract;
  CustomLaunchShape shape;
  std::vector<std::string> options;
};

std::string ReadSource(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::vector<std::string> MacrosOf(const std::string& contract) {
  if (contract == "index") {
    return {"GPUPROF_ROW_BYTES=14336", "GPUPROF_ELEMENT_BYTES=2", "GPUPROF_VOCAB_SIZE=129280"};
  }
  return {"GPUPROF_ROW_BYTES=2048", "GPUPROF_ELEMENT_BYTES=2", "GPUPROF_PAGE_SIZE=16"};
}

absl::StatusOr<kernels::UserKernelBinary> Compile(const Example& example) {
  v1::CustomKernel kernel;
  kernel.set_source(ReadSource(example.path));
  kernel.set_file_name(example.path.substr(example.path.rfind('/') + 1));
  kernel.set_kernel_name(example.kernel_name);
  for (const std::string& option : example.options) kernel.add_compile_options(option);
  const kernels::UserKernelCompileRequest request = MakeUserKernelCompileRequest(
      kernel, example.contract, example.shape, MacrosOf(example.contract), {9, 0});
  const char* tmp = std::getenv("TEST_TMPDIR");
  const kernels::JitCache cache(std::string(tmp != nullptr ? tmp : "/tmp") + "/examples_jit");
  return kernels::CompileUserKernel(request, {}, cache);
}

TEST(ExampleKernelsCompileTest, ExamplesAndBrokenKernelsThatShouldCompileDo) {
  const std::vector<Example> examples = {
      {"examples/custom_kernels/index_gather.cu", "index_gather", "index", {256, 8, 0}, {}},
      {"examples/custom_kernels/index_gather.cu", "index_gather", "index", {128, 1, 0}, {}},
      {"examples/custom_kernels/index_builtin_gather.cu", "builtin_gather", "index",
       {128, 4, 0}, {}},
      {"examples/custom_kernels/index_builtin_gather.cu", "builtin_gather", "index",
       {256, 2, 0}, {"-DBUILTIN_NUM_SPLITS=4"}},
      {"examples/custom_kernels/store_scatter.cu", "store_scatter", "store", {256, 8, 0}, {}},
      {"tests/e2e/custom_kernels/index_wrong.cu", "index_wrong", "index", {}, {}},
      {"tests/e2e/custom_kernels/index_out_of_bounds.cu", "index_out_of_bounds", "index", {}, {}},
      {"tests/e2e/custom_kernels/index_never_returns.cu", "index_never_returns", "index", {}, {}},
      {"tests/e2e/custom_kernels/index_illegal_address.cu", "index_illegal_address", "index", {},
       {}},
      {"tests/e2e/custom_kernels/store_wrong.cu", "store_wrong", "store", {}, {}},
      {"tests/e2e/custom_kernels/store_out_of_bounds.cu", "store_out_of_bounds", "store", {}, {}},
      {"tests/e2e/custom_kernels/store_never_returns.cu", "store_never_returns", "store", {}, {}},
  };
  for (const Example& example : examples) {
    const absl::StatusOr<kernels::UserKernelBinary> binary = Compile(example);
    ASSERT_TRUE(binary.ok()) << example.path << ": " << binary.status();
    EXPECT_EQ(binary->lowered_name, example.kernel_name);
    EXPECT_FALSE(binary->cubin.empty());
  }
}

TEST(ExampleKernelsCompileTest, BrokenKernelsFailWithTheCompilersFileAndLine) {
  for (const auto& [example, line] : std::vector<std::pair<Example, std::string>>{
           {{"tests/e2e/custom_kernels/index_does_not_compile.cu", "index_does_not_compile",
             "index", {}, {}},
            "index_does_not_compile.cu(5): error"},
           {{"tests/e2e/custom_kernels/store_does_not_compile.cu", "store_does_not_compile",
             "store", {}, {}},
            "store_does_not_compile.cu(5): error"}}) {
    const absl::StatusOr<kernels::UserKernelBinary> binary = Compile(example);
    ASSERT_FALSE(binary.ok()) << example.path;
    EXPECT_EQ(binary.status().code(), absl::StatusCode::kInvalidArgument) << binary.status();
    EXPECT_THAT(binary.status().message(), HasSubstr(line));
  }
}

// Our gather's launch rule is checked at compile time: a shape that is not ours is refused.
TEST(ExampleKernelsCompileTest, TheBuiltinGatherRefusesAGridThatIsNotOurs) {
  const absl::StatusOr<kernels::UserKernelBinary> binary =
      Compile({"examples/custom_kernels/index_builtin_gather.cu", "builtin_gather", "index",
               {128, 1, 0}, {}});
  ASSERT_FALSE(binary.ok());
  EXPECT_THAT(binary.status().message(), HasSubstr("our grid"));
}

}  // namespace
}  // namespace gpuprof::workloads
