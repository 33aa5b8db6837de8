// The decode example and the e2e test's broken decode kernels compile (or, for the one meant
// not to, fail with the compiler's file(line) message) as the worker compiles them: NVRTC with
// only the contract header, the launch shape's macros and the decode contract's, for every head
// size, bf16 and fp16, group sizes from 1 to 8, page sizes 1 to 64. Needs no GPU.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/custom/user_kernel_compile.h"
#include "kernels/jit/jit_cache.h"
#include "workloads/custom_kernel/custom_kernel_plan.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;
using ::testing::HasSubstr;

struct DecodeShape {
  int head_dim = 128;
  int group_size = 4;
  int page_size = 16;
  bool bf16 = true;
};

// As DecodeContractPlan::ContractMacros writes them.
std::vector<std::string> DecodeMacros(const DecodeShape& shape) {
  return {absl::StrCat("GPUPROF_HEAD_DIM=", shape.head_dim),
          absl::StrCat("GPUPROF_GROUP_SIZE=", shape.group_size),
          absl::StrCat("GPUPROF_PAGE_SIZE=", shape.page_size),
          absl::StrCat("GPUPROF_DTYPE_BF16=", shape.bf16 ? 1 : 0),
          "GPUPROF_ELEMENT_BYTES=2",
          absl::StrCat("GPUPROF_ROW_BYTES=", shape.head_dim * 2)};
}

std::string ReadSource(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

absl::StatusOr<kernels::UserKernelBinary> Compile(const std::string& path,
                                                  const std::string& kernel_name,
                                                  const CustomLaunchShape& launch,
                                                  const DecodeShape& shape) {
  v1::CustomKernel kernel;
  kernel.set_source(ReadSource(path));
  EXPECT_FALSE(kernel.source().empty()) << path;
  kernel.set_file_name(path.substr(path.rfind('/') + 1));
  kernel.set_kernel_name(kernel_name);
  const kernels::UserKernelCompileRequest request =
      MakeUserKernelCompileRequest(kernel, "decode", launch, DecodeMacros(shape), {9, 0});
  const char* tmp = std::getenv("TEST_TMPDIR");
  const kernels::JitCache cache(std::string(tmp != nullptr ? tmp : "/tmp") + "/decode_jit");
  return kernels::CompileUserKernel(request, {}, cache);
}

TEST(DecodeKernelsCompileTest, TheExampleCompilesForEveryShapeTheContractAllows) {
  const std::vector<std::pair<CustomLaunchShape, DecodeShape>> cases = {
      {{256, 1, 0}, {128, 4, 16, true}},  {{128, 1, 0}, {128, 4, 16, false}},
      {{64, 3, 0}, {64, 1, 1, true}},     {{256, 1, 0}, {256, 8, 64, true}},
      {{512, 2, 0}, {256, 1, 32, false}}, {{32, 1, 0}, {64, 8, 16, true}},
  };
  for (const auto& [launch, shape] : cases) {
    const absl::StatusOr<kernels::UserKernelBinary> binary =
        Compile("examples/custom_kernels/decode_paged.cu", "decode_paged", launch, shape);
    ASSERT_TRUE(binary.ok()) << "head_dim " << shape.head_dim << ", group " << shape.group_size
                             << ": " << binary.status();
    EXPECT_EQ(binary->lowered_name, "decode_paged");
    EXPECT_FALSE(binary->cubin.empty());
  }
}

TEST(DecodeKernelsCompileTest, BrokenKernelsThatShouldCompileDo) {
  for (const char* name : {"decode_wrong", "decode_out_of_bounds", "decode_reads_before_cache",
                           "decode_never_returns"}) {
    for (const bool bf16 : {true, false}) {
      const absl::StatusOr<kernels::UserKernelBinary> binary =
          Compile(absl::StrCat("tests/e2e/custom_kernels/", name, ".cu"), name, {},
                  {.head_dim = 128, .group_size = 4, .page_size = 16, .bf16 = bf16});
      ASSERT_TRUE(binary.ok()) << name << ": " << binary.status();
      EXPECT_EQ(binary->lowered_name, name);
    }
  }
}

TEST(DecodeKernelsCompileTest, AKernelThatDoesNotCompileFailsWithTheCompilersFileAndLine) {
  const absl::StatusOr<kernels::UserKernelBinary> binary = Compile(
      "tests/e2e/custom_kernels/decode_does_not_compile.cu", "decode_does_not_compile", {}, {});
  ASSERT_FALSE(binary.ok());
  EXPECT_EQ(binary.status().code(), absl::StatusCode::kInvalidArgument) << binary.status();
  EXPECT_THAT(binary.status().message(), HasSubstr("decode_does_not_compile.cu(5): error"));
  EXPECT_THAT(binary.status().message(), HasSubstr("no member \"kv_len\""));
}

}  // namespace
}  // namespace gpuprof::workloads
