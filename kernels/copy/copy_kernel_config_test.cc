#include "kernels/copy/copy_kernel_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::kernels {
namespace {

using ::testing::HasSubstr;

CopyKernelRequest IndexRequest(int64_t row_bytes, int64_t tokens) {
  return CopyKernelRequest{.kind = CopyKernelKind::kIndex,
                           .row_bytes = row_bytes,
                           .num_tokens = tokens,
                           .sm_count = 132};
}

TEST(WidestVectorBytesTest, LargestPowerOfTwoUpToSixteenThatDivides) {
  EXPECT_EQ(WidestVectorBytes(8192), 16);
  EXPECT_EQ(WidestVectorBytes(8200), 8);
  EXPECT_EQ(WidestVectorBytes(8190), 2);
  EXPECT_EQ(WidestVectorBytes(4), 4);
  EXPECT_EQ(WidestVectorBytes(3), 1);
}

TEST(ChooseCopyKernelConfigTest, ManyTokensOfShortRowsCopyWholeRowsInBigBlocks) {
  auto config = ChooseCopyKernelConfig(IndexRequest(2048, 16384));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_splits, 1);
  EXPECT_EQ(config->vec_bytes, 16);
  EXPECT_EQ(config->threads, kLargeBatchThreadsPerBlock);
  EXPECT_EQ(config->max_occupancy, 1);
  // An occupancy that 512-thread blocks cannot reach keeps the small blocks.
  CopyKernelRequest request = IndexRequest(2048, 16384);
  request.max_occupancy = 8;
  config = ChooseCopyKernelConfig(request);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->threads, kDefaultThreadsPerBlock);
  // The scatter measured slower with big blocks.
  request = IndexRequest(2048, 65536);
  request.kind = CopyKernelKind::kStore;
  config = ChooseCopyKernelConfig(request);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->threads, kDefaultThreadsPerBlock);
  EXPECT_EQ(config->num_splits, 1);
}

TEST(ChooseCopyKernelConfigTest, ManyTokensOfMediumRowsSplitInFour) {
  // 3, 4.5 and 8 KiB rows (hidden 1536, 2304, 4096 in bf16) at 4Ki tokens and more.
  for (int64_t row_bytes : {3072, 4608, 8192}) {
    for (int64_t tokens : {4096, 65536}) {
      auto config = ChooseCopyKernelConfig(IndexRequest(row_bytes, tokens));
      ASSERT_TRUE(config.ok()) << config.status();
      EXPECT_EQ(config->num_splits, kMediumRowSplits) << row_bytes << " x " << tokens;
      EXPECT_EQ(config->threads, kMediumRowThreadsPerBlock) << row_bytes << " x " << tokens;
      EXPECT_EQ(config->vec_bytes, 16);
    }
  }
  // An explicit thread count or split count is the caller's choice: no automatic split.
  CopyKernelRequest request = IndexRequest(4096, 16384);
  request.threads = 128;
  auto config = ChooseCopyKernelConfig(request);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_splits, 1);
  EXPECT_EQ(config->threads, 128);
  request = IndexRequest(4096, 16384);
  request.num_splits = 1;
  config = ChooseCopyKernelConfig(request);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_splits, 1);
  EXPECT_EQ(config->threads, kLargeBatchThreadsPerBlock);
  // A row whose quarter would leave a lane less than one vector keeps whole rows.
  config = ChooseCopyKernelConfig(IndexRequest(4095 * 2, 100000));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_splits, 1);
  EXPECT_EQ(config->threads, kLargeBatchThreadsPerBlock);
  // The store keeps whole rows.
  request = IndexRequest(4096, 65536);
  request.kind = CopyKernelKind::kStore;
  config = ChooseCopyKernelConfig(request);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_splits, 1);
}

TEST(ChooseCopyKernelConfigTest, ManyTokensOfLongRowsUseSmallBlocks) {
  for (int64_t row_bytes : {10240, 16384, 32768}) {
    auto config = ChooseCopyKernelConfig(IndexRequest(row_bytes, 16384));
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->num_splits, 1) << row_bytes;
    EXPECT_EQ(config->threads, kDefaultThreadsPerBlock) << row_bytes;
  }
}

TEST(ChooseCopyKernelConfigTest, FewTokensSplitRowsUntilEveryLaneHasOneVector) {
  // 64 tokens of 8 KiB: 16 splits of 512 bytes, one 16-byte vector per lane.
  auto config = ChooseCopyKernelConfig(IndexRequest(8192, 64));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_splits, 16);
  EXPECT_EQ(config->vec_bytes, 16);
  EXPECT_EQ(config->threads, kDefaultThreadsPerBlock);
  // A 1 KiB row cannot split below 512 bytes a slice.
  config = ChooseCopyKernelConfig(IndexRequest(1024, 1));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_splits, 2);
}

TEST(ChooseCopyKernelConfigTest, NarrowVectorsForOddRows) {
  auto config = ChooseCopyKernelConfig(IndexRequest(4095 * 2, 100000));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_splits, 1);
  EXPECT_EQ(config->vec_bytes, 2);
}

TEST(ChooseCopyKernelConfigTest, ExplicitChoicesAreCheckedAndKept) {
  CopyKernelRequest request = IndexRequest(8192, 64);
  request.num_splits = 4;
  request.threads = 256;
  request.max_occupancy = 4;
  request.use_pdl = true;
  auto config = ChooseCopyKernelConfig(request);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_splits, 4);
  EXPECT_EQ(config->threads, 256);
  EXPECT_EQ(config->max_occupancy, 4);
  EXPECT_TRUE(config->use_pdl);

  // Any count up to kMaxSplits that divides the row, powers of two or not.
  request.num_splits = 16;
  EXPECT_TRUE(ChooseCopyKernelConfig(request).ok());
  request.num_splits = 3;
  EXPECT_THAT(ChooseCopyKernelConfig(request).status().message(),
              HasSubstr("index.num_splits: got 3; must be in [1, 128] and divide the row"));
  request.num_splits = 0;
  request.threads = 100;
  EXPECT_THAT(ChooseCopyKernelConfig(request).status().message(),
              HasSubstr("index.threads: got 100"));
  request.threads = 1024;
  request.max_occupancy = 4;
  EXPECT_THAT(ChooseCopyKernelConfig(request).status().message(),
              HasSubstr("index.max_occupancy: got 4; must be in [0, 2]"));
  EXPECT_THAT(ChooseCopyKernelConfig(IndexRequest(0, 1)).status().message(),
              HasSubstr("row size: got 0 bytes"));
}

TEST(CopyKernelNameExpressionTest, MapsEveryFieldToATemplateArgument) {
  CopyKernelConfig config{.kind = CopyKernelKind::kIndex,
                          .row_bytes = 8192,
                          .num_splits = 4,
                          .vec_bytes = 16,
                          .threads = 128,
                          .max_occupancy = 2,
                          .use_pdl = true,
                          .masked = true};
  auto name = CopyKernelNameExpression(config);
  ASSERT_TRUE(name.ok()) << name.status();
  EXPECT_EQ(*name, "gpuprof::kernels::jit::IndexKernel<8192, 4, 16, 128, 2, true, true>");
  EXPECT_EQ(CopyKernelName(config), "index_gather_masked");
  EXPECT_EQ(CopyKernelTemplateKey(config), "row8192_s4_v16_t128_o2_pdl1");
  config.kind = CopyKernelKind::kStore;
  config.masked = false;
  EXPECT_EQ(*CopyKernelNameExpression(config),
            "gpuprof::kernels::jit::StoreKernel<8192, 4, 16, 128, 2, true, false>");
  EXPECT_EQ(CopyKernelName(config), "store_scatter");
  EXPECT_EQ(CopyKernelSourcePath(config.kind), "kernels/copy/store_kernel.cuh");
}

TEST(CopyKernelNameExpressionTest, RefusesValuesNoTemplateTakes) {
  CopyKernelConfig config{.row_bytes = 8192, .num_splits = 4, .vec_bytes = 12};
  EXPECT_THAT(CopyKernelNameExpression(config).status().message(),
              HasSubstr("vector width: got 12 bytes"));
  config.vec_bytes = 16;
  config.num_splits = 256;
  EXPECT_THAT(CopyKernelNameExpression(config).status().message(),
              HasSubstr("num_splits: got 256; must be in [1, 128]"));
  config.num_splits = 4;
  config.row_bytes = 8200;  // 8200 / 4 = 2050 bytes: not whole 16-byte vectors
  EXPECT_THAT(CopyKernelNameExpression(config).status().message(),
              HasSubstr("row size: got 8200 bytes"));
}

TEST(CopyKernelLaunchShapeTest, OneWarpPerSlice) {
  const CopyKernelConfig config{.row_bytes = 8192, .num_splits = 4, .threads = 128};
  const LaunchShape shape = CopyKernelLaunchShape(config, 65);
  EXPECT_EQ(shape.threads, 128);
  EXPECT_EQ(shape.blocks, 65);  // 260 warps, 4 a block
  const auto described = DescribeCopyKernelConfig(config, 65);
  EXPECT_EQ(described.at("grid"), "65");
  EXPECT_EQ(described.at("masked"), "false");
}

}  // namespace
}  // namespace gpuprof::kernels
