#include "workloads/attention/attention_spec.h"

#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;
using ::testing::HasSubstr;

TEST(AttentionSpecTest, Fp8RunsOnComputeCapability90Only) {
  EXPECT_TRUE(CheckAttentionDtypeRunsOn(v1::DATA_TYPE_FP8_E4M3, 9, 0).ok());
  for (const auto& [major, minor] : {std::pair{8, 0}, std::pair{8, 9}, std::pair{10, 0}}) {
    const absl::Status status = CheckAttentionDtypeRunsOn(v1::DATA_TYPE_FP8_E4M3, major, minor);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_THAT(status.message(),
                HasSubstr("attention.dtype: got fp8-e4m3; fp8 e4m3 runs only on compute "
                          "capability 9.0 (H100, H200)"));
  }
  EXPECT_THAT(CheckAttentionDtypeRunsOn(v1::DATA_TYPE_FP8_E4M3, 8, 9).message(),
              HasSubstr("this GPU is 8.9"));
  // bf16 and fp16 run on every GPU the kernels are built for.
  for (v1::DataType dtype : {v1::DATA_TYPE_BF16, v1::DATA_TYPE_FP16}) {
    EXPECT_TRUE(CheckAttentionDtypeRunsOn(dtype, 8, 0).ok());
    EXPECT_TRUE(CheckAttentionDtypeRunsOn(dtype, 9, 0).ok());
  }
}

}  // namespace
}  // namespace gpuprof::workloads
