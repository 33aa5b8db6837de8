// LaunchPrefill's choice among the prefill kernels, without a Hopper GPU: the Hopper kernel is
// refused with a reason before anything is launched, and every variant has its own name.
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/prefill.h"

namespace gpuprof::attention {
namespace {

TEST(PrefillVariantTest, EveryVariantHasItsOwnName) {
  std::set<std::string> names;
  for (PrefillVariant variant : {PrefillVariant::kAuto, PrefillVariant::kQInRegisters,
                                 PrefillVariant::kTwoRowTiles, PrefillVariant::kHopperWgmma}) {
    names.insert(std::string(PrefillVariantName(variant)));
  }
  EXPECT_EQ(names.size(), 4u);
  EXPECT_EQ(PrefillVariantName(PrefillVariant::kHopperWgmma), "hopper_wgmma");
}

TEST(PrefillVariantTest, TheHopperKernelIsRefusedWhereItCannotRun) {
  if (PrefillVariantRunsHere(PrefillVariant::kHopperWgmma)) {
    GTEST_SKIP() << "this machine has a compute capability 9.0 GPU";
  }
  EXPECT_TRUE(PrefillVariantRunsHere(PrefillVariant::kTwoRowTiles));
  // A valid problem whose buffers are never touched: the refusal comes before any launch.
  static char fake[64];
  AttentionProblem problem{
      .shape = AttentionShape{.num_qo_heads = 8,
                              .num_kv_heads = 2,
                              .head_dim = 128,
                              .page_size = 16,
                              .dtype = AttentionDtype::kBf16,
                              .causal = true},
      .lengths = SequenceLengths{.q_lens = {16}, .kv_lens = {16}, .num_pages = {1}}};
  AttentionBuffers& b = problem.buffers;
  b.q = b.k_cache = b.v_cache = fake;
  b.o = fake;
  b.num_pages = 1;
  b.q_indptr = b.kv_lens = b.page_indptr = b.page_indices = reinterpret_cast<int32_t*>(fake);
  const absl::StatusOr<PrefillLaunchInfo> info =
      LaunchPrefill(problem, /*stream=*/nullptr, PrefillVariant::kHopperWgmma);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kFailedPrecondition) << info.status();
  EXPECT_NE(info.status().message().find("hopper_wgmma"), std::string::npos) << info.status();
  EXPECT_NE(info.status().message().find("compute capability 9.0"), std::string::npos)
      << info.status();
}

}  // namespace
}  // namespace gpuprof::attention
