// LaunchPrefill's choice among the prefill kernels, without a GPU: which variant kAuto resolves
// to per head_dim and GPU, a variant refused with a reason before anything is launched where it
// cannot run, and every variant has its own name.
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/prefill.h"

namespace gpuprof::attention {
namespace {

TEST(PrefillVariantTest, EveryVariantHasItsOwnName) {
  std::set<std::string> names = {std::string(PrefillVariantName(PrefillVariant::kAuto))};
  for (PrefillVariant variant : ConcretePrefillVariants()) {
    names.insert(std::string(PrefillVariantName(variant)));
  }
  EXPECT_EQ(names.size(), ConcretePrefillVariants().size() + 1);
  EXPECT_EQ(names.count("unknown"), 0u);
  EXPECT_EQ(PrefillVariantName(PrefillVariant::kHopperWgmma), "hopper_wgmma");
  EXPECT_EQ(PrefillVariantName(PrefillVariant::kWideHead), "wide_head");
}

TEST(PrefillVariantTest, AutoPicksByHeadDimAndGpu) {
  const PrefillGpu hopper{.sm90 = true};
  // Both portable kernels two blocks an SM (registers limit them alike on an H100).
  const PrefillGpu equal{.two_row_tiles_blocks_per_sm = 2, .staggered_blocks_per_sm = 2};
  // An A100's 164 KB hold one two-stage block (96 KB at head_dim 128) but two staggered ones.
  const PrefillGpu a100{.two_row_tiles_blocks_per_sm = 1, .staggered_blocks_per_sm = 2};
  for (int head_dim : {64, 128, 256}) {
    EXPECT_EQ(ChoosePrefillVariant(PrefillVariant::kAuto, head_dim, hopper).value(),
              PrefillVariant::kHopperWgmma);
  }
  for (int head_dim : {64, 128}) {
    EXPECT_EQ(ChoosePrefillVariant(PrefillVariant::kAuto, head_dim, equal).value(),
              PrefillVariant::kTwoRowTiles);
    EXPECT_EQ(ChoosePrefillVariant(PrefillVariant::kAuto, head_dim, a100).value(),
              PrefillVariant::kStaggered);
  }
  EXPECT_EQ(ChoosePrefillVariant(PrefillVariant::kAuto, 256, a100).value(),
            PrefillVariant::kWideHead);
  for (const PrefillGpu& gpu : {hopper, a100}) {
    EXPECT_EQ(ChoosePrefillVariant(PrefillVariant::kWideHead, 256, gpu).value(),
              PrefillVariant::kWideHead);
    EXPECT_EQ(ChoosePrefillVariant(PrefillVariant::kQInRegisters, 128, gpu).value(),
              PrefillVariant::kQInRegisters);
  }
}

TEST(PrefillVariantTest, AVariantIsRefusedForAHeadDimItIsNotBuiltFor) {
  const absl::StatusOr<PrefillVariant> narrow =
      ChoosePrefillVariant(PrefillVariant::kTwoRowTiles, 256, PrefillGpu{});
  ASSERT_FALSE(narrow.ok());
  EXPECT_EQ(narrow.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(narrow.status().message(),
            "prefill variant two_row_tiles takes head_dim 64, 128; got 256");
  const absl::StatusOr<PrefillVariant> wide =
      ChoosePrefillVariant(PrefillVariant::kWideHead, 128, PrefillGpu{.sm90 = true});
  ASSERT_FALSE(wide.ok());
  EXPECT_EQ(wide.status().message(), "prefill variant wide_head takes head_dim 256; got 128");
  // The head_dim is checked before the GPU: a Hopper request at 96 says what 96 lacks.
  const absl::StatusOr<PrefillVariant> hopper =
      ChoosePrefillVariant(PrefillVariant::kHopperWgmma, 96, PrefillGpu{});
  ASSERT_FALSE(hopper.ok());
  EXPECT_EQ(hopper.status().message(),
            "prefill variant hopper_wgmma takes head_dim 64, 128, 256; got 96");
  EXPECT_FALSE(PrefillVariantTakesHeadDim(PrefillVariant::kAuto, 96));
  EXPECT_TRUE(PrefillVariantTakesHeadDim(PrefillVariant::kAuto, 256));
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
