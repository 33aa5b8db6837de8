// The host side of the attention kernels, no GPU: validation, FLOP and byte accounting, the
// paged layout, the decode split heuristic and the error comparison.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/attention/attention_check.h"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/decode_plan.h"
#include "kernels/attention/paged_layout.h"

namespace gpuprof::attention {
namespace {

AttentionShape Shape(int qo, int kv, int dim, bool causal, int page = 16) {
  return AttentionShape{.num_qo_heads = qo,
                        .num_kv_heads = kv,
                        .head_dim = dim,
                        .page_size = page,
                        .dtype = AttentionDtype::kBf16,
                        .causal = causal};
}

SequenceLengths Lengths(std::vector<int32_t> q, std::vector<int32_t> kv, int page = 16) {
  SequenceLengths lengths{.q_lens = std::move(q), .kv_lens = std::move(kv)};
  for (int32_t n : lengths.kv_lens) lengths.num_pages.push_back((n + page - 1) / page);
  return lengths;
}

void ExpectInvalid(const absl::Status& status, const std::string& field) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(field), std::string::npos) << status;
}

TEST(AttentionParamsTest, AcceptsGroupedHeadsAndPowerOfTwoPages) {
  for (int page : {1, 16, 32, 64}) {
    EXPECT_TRUE(ValidateAttentionShape(Shape(32, 8, 128, true, page), {64, 128}).ok());
  }
  EXPECT_TRUE(ValidateAttentionShape(Shape(7, 1, 64, false), {64, 128}).ok());
}

TEST(AttentionParamsTest, RejectsBadShapesNamingTheField) {
  ExpectInvalid(ValidateAttentionShape(Shape(12, 8, 128, true), {64, 128}), "num_kv_heads (8)");
  ExpectInvalid(ValidateAttentionShape(Shape(0, 8, 128, true), {64, 128}), "num_qo_heads");
  ExpectInvalid(ValidateAttentionShape(Shape(8, 8, 96, true), {64, 128}), "head_dim (96)");
  ExpectInvalid(ValidateAttentionShape(Shape(8, 8, 128, true, 24), {64, 128}), "page_size (24)");
  AttentionShape scaled = Shape(8, 8, 128, true);
  scaled.softmax_scale = -1.0f;
  ExpectInvalid(ValidateAttentionShape(scaled, {128}), "softmax_scale");
}

TEST(AttentionParamsTest, Fp8IsOneByteInWithABf16Output) {
  EXPECT_EQ(DtypeBytes(AttentionDtype::kFp8E4m3), 1);
  EXPECT_EQ(DtypeName(AttentionDtype::kFp8E4m3), "fp8-e4m3");
  EXPECT_EQ(OutputDtype(AttentionDtype::kFp8E4m3), AttentionDtype::kBf16);
  EXPECT_EQ(OutputDtypeBytes(AttentionDtype::kFp8E4m3), 2);
  for (AttentionDtype dtype : {AttentionDtype::kBf16, AttentionDtype::kFp16}) {
    EXPECT_EQ(DtypeBytes(dtype), 2);
    EXPECT_EQ(OutputDtype(dtype), dtype);
  }
  EXPECT_EQ(DtypeName(AttentionDtype::kBf16), "bf16");
  EXPECT_EQ(DtypeName(AttentionDtype::kFp16), "fp16");
}

TEST(AttentionParamsTest, ScalesMustBeFiniteAndPositive) {
  AttentionShape shape = Shape(8, 8, 128, true);
  shape.dtype = AttentionDtype::kFp8E4m3;
  shape.q_scale = 2.0f / 240;
  shape.k_scale = shape.v_scale = 1.0f / 240;
  EXPECT_TRUE(ValidateAttentionShape(shape, {128}).ok());
  for (float bad : {0.0f, -1.0f, INFINITY, NAN}) {
    AttentionShape q = shape, k = shape, v = shape;
    q.q_scale = bad;
    k.k_scale = bad;
    v.v_scale = bad;
    ExpectInvalid(ValidateAttentionShape(q, {128}), "q_scale");
    ExpectInvalid(ValidateAttentionShape(k, {128}), "k_scale");
    ExpectInvalid(ValidateAttentionShape(v, {128}), "v_scale");
  }
  // Kernels of other types ignore the scales, so they must be 1 there.
  AttentionShape bf16 = Shape(8, 8, 128, true);
  bf16.k_scale = 0.5f;
  ExpectInvalid(ValidateAttentionShape(bf16, {128}), "k_scale (0.5) must be 1 for bf16");
}

TEST(AttentionParamsTest, RejectsBadLengthsNamingTheSequence) {
  const AttentionShape causal = Shape(8, 8, 128, true);
  EXPECT_TRUE(ValidateSequenceLengths(causal, Lengths({4, 0}, {10, 3})).ok());
  ExpectInvalid(ValidateSequenceLengths(causal, Lengths({11}, {10})), "q_lens[0] (11)");
  EXPECT_TRUE(ValidateSequenceLengths(Shape(8, 8, 128, false), Lengths({11}, {10})).ok());
  ExpectInvalid(ValidateSequenceLengths(causal, Lengths({1, 1}, {10, 0})), "kv_lens[1]");
  SequenceLengths short_pages = Lengths({1}, {33});
  short_pages.num_pages = {2};
  ExpectInvalid(ValidateSequenceLengths(causal, short_pages), "num_pages[0] (2)");
  SequenceLengths mismatched = Lengths({1, 1}, {3});
  ExpectInvalid(ValidateSequenceLengths(causal, mismatched), "kv_lens has 1");
  ExpectInvalid(ValidateSequenceLengths(causal, SequenceLengths{}), "q_lens is empty");
}

TEST(AttentionParamsTest, ProblemNeedsDevicePointers) {
  AttentionProblem problem{.shape = Shape(8, 8, 128, true), .lengths = Lengths({1}, {16})};
  ExpectInvalid(ValidateAttentionProblem(problem, {128}), "buffers.q");
}

TEST(AttentionParamsTest, CountsFlopsPerConvention) {
  // Non-causal: every pair. 4 * heads * q * kv * d.
  EXPECT_DOUBLE_EQ(AttentionFlops(Shape(32, 8, 128, false), Lengths({4096}, {4096})),
                   4.0 * 32 * 4096.0 * 4096 * 128);
  // Causal, q == kv: exactly half.
  EXPECT_DOUBLE_EQ(AttentionFlops(Shape(32, 8, 128, true), Lengths({4096}, {4096})),
                   2.0 * 32 * 4096.0 * 4096 * 128);
  // Causal chunk of 2 queries over 5 keys: query 0 sees 4 keys, query 1 sees 5.
  EXPECT_DOUBLE_EQ(AttentionPairs(Shape(1, 1, 64, true), Lengths({2}, {5})), 9.0);
  // Decode: q_len 1 sees everything, causal or not.
  EXPECT_DOUBLE_EQ(AttentionPairs(Shape(1, 1, 64, true), Lengths({1, 1}, {100, 7})), 107.0);
  // Sums over ragged sequences.
  EXPECT_DOUBLE_EQ(AttentionPairs(Shape(1, 1, 64, false), Lengths({2, 3}, {5, 7})), 31.0);
}

TEST(AttentionParamsTest, CountsBytesOncePerKvHead) {
  // Decode batch 2, 32/8 heads, d128, bf16: Q + O = 2 * 2 * 32 * 128 * 2 bytes; K + V =
  // 2 * (1000 + 3000) * 8 * 128 * 2 bytes.
  const double expected = 2.0 * 2 * 32 * 128 * 2 + 2.0 * 4000 * 8 * 128 * 2;
  EXPECT_DOUBLE_EQ(AttentionBytes(Shape(32, 8, 128, false), Lengths({1, 1}, {1000, 3000})),
                   expected);
  // fp8: Q, K and V at 1 byte, O in bf16 at 2.
  AttentionShape fp8 = Shape(32, 8, 128, false);
  fp8.dtype = AttentionDtype::kFp8E4m3;
  EXPECT_DOUBLE_EQ(AttentionBytes(fp8, Lengths({1, 1}, {1000, 3000})),
                   2.0 * 32 * 128 * (1 + 2) + 2.0 * 4000 * 8 * 128 * 1);
}

TEST(PagedLayoutTest, BuildsAPermutationOfPagesPerSequence) {
  SequenceLengths lengths{.q_lens = {1, 5, 0}, .kv_lens = {1, 40, 16}};
  auto layout = BuildPagedLayout(lengths, 16, /*seed=*/42);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(lengths.num_pages, (std::vector<int32_t>{1, 3, 1}));
  EXPECT_EQ(layout->q_indptr, (std::vector<int32_t>{0, 1, 6, 6}));
  EXPECT_EQ(layout->page_indptr, (std::vector<int32_t>{0, 1, 4, 5}));
  EXPECT_EQ(layout->num_pages, 5);
  std::vector<int32_t> sorted = layout->page_indices;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  // Row 17 of sequence 1 sits in its second page, slot 1.
  EXPECT_EQ(PagedRowIndex(*layout, 16, 1, 17), layout->page_indices[2] * 16 + 1);
  EXPECT_FALSE(BuildPagedLayout(lengths, 12, 1).ok());
}

// A GQA 32/8 decode on an H100 (132 SMs): `batch` sequences of `kv_len` keys, one query each;
// the residencies are the tests' own.
DecodePlanInput H100Decode(int batch, int kv_len, int blocks_per_sm,
                           int prefetch_blocks_per_sm = 0, int tensor_core_blocks_per_sm = 0) {
  return DecodePlanInput{.batch = batch,
                         .num_kv_heads = 8,
                         .group_size = 4,
                         .max_q_len = 1,
                         .max_kv_len = kv_len,
                         .sm_count = 132,
                         .blocks_per_sm = blocks_per_sm,
                         .prefetch_blocks_per_sm = prefetch_blocks_per_sm,
                         .tensor_core_blocks_per_sm = tensor_core_blocks_per_sm};
}

TEST(DecodePlanTest, FillsTheGpuAtSmallBatchAndStaysUnsplitAtLargeBatch) {
  DecodePlanInput input = H100Decode(/*batch=*/1, /*kv_len=*/32768, /*blocks_per_sm=*/3);
  auto small = PlanDecode(input);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->rows_per_block, 4);
  EXPECT_EQ(small->row_chunks, 1);
  EXPECT_EQ(small->num_splits, 49);  // floor(396 / 8): one wave
  EXPECT_EQ(small->blocks, 392);

  input.batch = 32;
  input.max_kv_len = 4096;
  EXPECT_EQ(PlanDecode(input)->num_splits, 1);  // 256 blocks: 2 splits would not fit 396 slots
  input.blocks_per_sm = 4;
  EXPECT_EQ(PlanDecode(input)->num_splits, 2);  // 512 <= 528

  input.blocks_per_sm = 3;
  input.batch = 128;
  input.max_kv_len = 4096;
  auto large = PlanDecode(input);
  ASSERT_TRUE(large.ok());
  EXPECT_EQ(large->num_splits, 1);  // 1024 blocks already fill 396 slots

  input.batch = 4;
  input.max_kv_len = 600;  // at most 600 / 256 = 2 splits of useful length
  EXPECT_EQ(PlanDecode(input)->num_splits, 2);

  input.requested_splits = 7;
  EXPECT_EQ(PlanDecode(input)->num_splits, 7);
  input.requested_splits = 1000;
  EXPECT_EQ(PlanDecode(input)->num_splits, kMaxDecodeSplits);
  input.max_kv_len = 5;
  EXPECT_EQ(PlanDecode(input)->num_splits, 5);  // no more splits than keys
}

TEST(DecodePlanTest, PrefetchesUnlessItsFewerResidentBlocksCostAWave) {
  // H100-like: the plain kernel keeps 4 blocks per SM resident, the prefetching one 3.
  DecodePlanInput input = H100Decode(/*batch=*/32, /*kv_len=*/4096, /*blocks_per_sm=*/4,
                                     /*prefetch_blocks_per_sm=*/3);
  // 256 blocks are one wave either way (plain would split in 2 to fill 528 slots): prefetch.
  auto plan = PlanDecode(input);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->prefetch);
  EXPECT_EQ(plan->num_splits, 1);
  // 512 blocks: one wave of 528 plain slots, two of 396 prefetching ones (2 x 0.8 > 1).
  input.batch = 64;
  EXPECT_FALSE(PlanDecode(input)->prefetch);
  // 1024 blocks: 2 plain waves against 3 prefetching (2.4).
  input.batch = 128;
  EXPECT_FALSE(PlanDecode(input)->prefetch);
  // Batch 1, long KV: both fill one wave with splits; the prefetching kernel is faster.
  input.batch = 1;
  input.max_kv_len = 32768;
  plan = PlanDecode(input);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->prefetch);
  EXPECT_EQ(plan->num_splits, 49);  // floor(396 / 8)
  // Without the prefetching kernel on offer the plain one is planned as before.
  input.prefetch_blocks_per_sm = 0;
  EXPECT_FALSE(PlanDecode(input)->prefetch);
  EXPECT_EQ(PlanDecode(input)->num_splits, 64);
}

TEST(DecodePlanTest, TensorCoresForOneSequenceWhereOffered) {
  DecodePlanInput input = H100Decode(/*batch=*/1, /*kv_len=*/8192, /*blocks_per_sm=*/4,
                                     /*prefetch_blocks_per_sm=*/3,
                                     /*tensor_core_blocks_per_sm=*/2);
  auto plan = PlanDecode(input);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->tensor_cores);
  EXPECT_FALSE(plan->prefetch);
  EXPECT_EQ(plan->rows_per_block, kTensorCoreRowsPerBlock);
  EXPECT_EQ(plan->row_chunks, 1);
  EXPECT_EQ(plan->num_splits, 32);  // min(264 slots / 8 blocks, 8192 / 256)
  EXPECT_EQ(plan->blocks, 256);
  // Batch 4 x 8 KV heads: the CUDA-core kernels, as before.
  input.batch = 4;
  plan = PlanDecode(input);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->tensor_cores);
  EXPECT_EQ(plan->rows_per_block, 4);
  // Not offered: never.
  input.batch = 1;
  input.tensor_core_blocks_per_sm = 0;
  EXPECT_FALSE(PlanDecode(input)->tensor_cores);
  // Forced with more rows than one tile holds: refused with the count.
  input.group_size = 8;
  input.max_q_len = 4;
  input.tensor_core_blocks_per_sm = 2;
  const absl::StatusOr<DecodePlan> too_many = PlanTensorCoreDecode(input);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("(32)"), std::string::npos) << too_many.status();
  // Offered but those rows do not fit one tile: the plan takes the CUDA-core kernels itself.
  EXPECT_FALSE(PlanMayUseTensorCores(input));
  plan = PlanDecode(input);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->tensor_cores);
  EXPECT_EQ(plan->rows_per_block, kMaxDecodeRowsPerBlock);
}

TEST(DecodePlanTest, TensorCoresAtHeadDim256HoldEightRows) {
  EXPECT_EQ(TensorCoreRowsPerBlock(64), kTensorCoreRowsPerBlock);
  EXPECT_EQ(TensorCoreRowsPerBlock(128), kTensorCoreRowsPerBlock);
  EXPECT_EQ(TensorCoreRowsPerBlock(256), 8);
  DecodePlanInput input = H100Decode(/*batch=*/1, /*kv_len=*/8192, /*blocks_per_sm=*/4,
                                     /*prefetch_blocks_per_sm=*/3,
                                     /*tensor_core_blocks_per_sm=*/1);
  input.tensor_core_max_rows = TensorCoreRowsPerBlock(256);
  input.tensor_core_max_row_chunks = TensorCoreRowChunks(256);
  input.group_size = 8;
  auto plan = PlanTensorCoreDecode(input);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->tensor_cores);
  EXPECT_EQ(plan->rows_per_block, 8);
  EXPECT_EQ(plan->row_chunks, 1);
  // Nine rows (a group of 3 x 3 drafts): two blocks of 8 a KV head, splits planned for both.
  input.group_size = 3;
  input.max_q_len = 3;
  plan = PlanTensorCoreDecode(input);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->row_chunks, 2);
  EXPECT_EQ(plan->num_splits, 8);  // min(132 slots / 16 blocks, 8192 / 256)
  // Eighteen rows are refused forced and not planned on tensor cores.
  input.group_size = 6;
  const absl::StatusOr<DecodePlan> too_many = PlanTensorCoreDecode(input);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("(18) exceeds the tensor-core kernel's 16 rows"),
            std::string::npos)
      << too_many.status();
  EXPECT_FALSE(PlanMayUseTensorCores(input));
  plan = PlanDecode(input);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->tensor_cores);
}

TEST(DecodePlanTest, TensorCoresAtAnyBatchFromFourRowsAtHeadDim256) {
  EXPECT_EQ(TensorCoreRowsAtAnyBatch(64), 0);
  EXPECT_EQ(TensorCoreRowsAtAnyBatch(128), 0);
  DecodePlanInput input = H100Decode(/*batch=*/32, /*kv_len=*/4096, /*blocks_per_sm=*/4,
                                     /*prefetch_blocks_per_sm=*/3,
                                     /*tensor_core_blocks_per_sm=*/1);
  input.tensor_core_max_rows = TensorCoreRowsPerBlock(256);
  input.tensor_core_max_row_chunks = TensorCoreRowChunks(256);
  input.tensor_core_rows_at_any_batch = TensorCoreRowsAtAnyBatch(256);
  // Batch 32 x 8 KV heads is past the batch rule; a group of 8 takes the tensor cores anyway.
  input.group_size = 8;
  EXPECT_TRUE(PlanMayUseTensorCores(input));
  auto plan = PlanDecode(input);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->tensor_cores);
  EXPECT_EQ(plan->rows_per_block, 8);
  // A group of 2 (fewer rows than the rule's 4) keeps the CUDA-core kernels at that batch.
  input.group_size = 2;
  EXPECT_FALSE(PlanMayUseTensorCores(input));
  plan = PlanDecode(input);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->tensor_cores);
  // Sixteen rows take two blocks a KV head; seventeen do not fit the kernel at all.
  input.group_size = 16;
  EXPECT_TRUE(PlanMayUseTensorCores(input));
  input.group_size = 17;
  EXPECT_FALSE(PlanMayUseTensorCores(input));
}

TEST(DecodePlanTest, GroupsRowsPerBlock) {
  DecodePlanInput input{.batch = 2,
                        .num_kv_heads = 2,
                        .group_size = 8,
                        .max_q_len = 4,
                        .max_kv_len = 100,
                        .sm_count = 10,
                        .blocks_per_sm = 1};
  auto plan = PlanDecode(input);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->rows_per_block, 8);
  EXPECT_EQ(plan->row_chunks, 4);  // 32 rows
  input.group_size = 3;
  input.max_q_len = 1;
  EXPECT_EQ(PlanDecode(input)->rows_per_block, 3);  // exact, not padded to 4
  input.group_size = 7;
  EXPECT_EQ(PlanDecode(input)->rows_per_block, 7);
  EXPECT_EQ(PlanDecode(input)->row_chunks, 1);
  input.group_size = 5;
  input.max_q_len = 2;  // 10 rows: two blocks of 5, not 8 + 2 padded to 8
  EXPECT_EQ(PlanDecode(input)->rows_per_block, 5);
  EXPECT_EQ(PlanDecode(input)->row_chunks, 2);
  input.group_size = 3;
  input.max_q_len = 9;
  EXPECT_FALSE(PlanDecode(input).ok());
  input.max_q_len = 1;
  input.num_kv_heads = 0;
  EXPECT_FALSE(PlanDecode(input).ok());
}

TEST(DecodePlanTest, TunesSplitsAroundThePlanWithinTheKvLength) {
  using ::testing::ElementsAre;
  // Batch 1 x 1k: the plan stops at 4 splits of 256 keys; tuning tries down to 32 keys a split.
  EXPECT_THAT(DecodeSplitCandidates(4, 1024, 0), ElementsAre(1, 2, 4, 8, 16, 32));
  // The plan's own count is tried even where it is no power of two.
  EXPECT_THAT(DecodeSplitCandidates(33, 16384, 0), ElementsAre(1, 2, 4, 8, 16, 32, 33, 64));
  // A batch that fills the GPU unsplit: up to kMaxTunedSplitsOverPlan.
  EXPECT_THAT(DecodeSplitCandidates(1, 32768, 0), ElementsAre(1, 2, 4, 8));
  // Short sequences are not split below kMinTunedKvRowsPerSplit keys.
  EXPECT_THAT(DecodeSplitCandidates(1, 40, 0), ElementsAre(1));
  // A caller's count is the only one.
  EXPECT_THAT(DecodeSplitCandidates(4, 1024, 3), ElementsAre(3));
}

TEST(DecodePlanTest, HalvingSplitsCoverTheKeysOnTileBoundaries) {
  // 16k keys in 8: half, a quarter, ... 1/128, 1/128.
  const std::vector<int> expected = {0, 8192, 12288, 14336, 15360, 15872, 16128, 16256, 16384};
  for (int s = 0; s <= 8; ++s) {
    EXPECT_EQ(HalvingSplitBegin(16384, s, 8, 16), expected[s]) << "split " << s;
  }
  // Any length and tile: the splits start at 0, each on a tile boundary (or at the end), in
  // order, and the last ends at kv_len.
  for (int kv_len : {1, 15, 16, 17, 45, 1000, 5000, 32767}) {
    for (int splits : {2, 4, 5, 8, 16}) {
      for (int tile : {16, 32}) {
        EXPECT_EQ(HalvingSplitBegin(kv_len, 0, splits, tile), 0);
        EXPECT_EQ(HalvingSplitBegin(kv_len, splits, splits, tile), kv_len);
        for (int s = 1; s < splits; ++s) {
          const int begin = HalvingSplitBegin(kv_len, s, splits, tile);
          EXPECT_TRUE(begin % tile == 0 || begin == kv_len) << kv_len << " " << s << " " << tile;
          EXPECT_LE(HalvingSplitBegin(kv_len, s - 1, splits, tile), begin);
          EXPECT_LE(begin, kv_len);
        }
      }
    }
  }
  // Two splits halve; the first split is never smaller than the second.
  EXPECT_EQ(HalvingSplitBegin(1000, 1, 2, 16), 512);
}

TEST(AttentionCheckTest, PassesWithinToleranceAndReportsErrors) {
  const std::vector<float> expected = {1.0f, -2.0f, 0.5f, 0.0f};
  const AttentionTolerance tolerance{.atol = 1e-2, .rtol = 1e-2, .max_rel_l2 = 1e-2};
  const auto same = CompareAttentionOutputs(expected, expected, tolerance);
  EXPECT_TRUE(same.passed);
  EXPECT_EQ(same.max_abs_error, 0.0);

  const std::vector<float> off = {1.0f, -2.1f, 0.5f, 0.0f};
  const auto report = CompareAttentionOutputs(off, expected, tolerance);
  EXPECT_FALSE(report.passed);
  EXPECT_EQ(report.mismatches, 1);
  EXPECT_EQ(report.worst_index, 1);
  EXPECT_NEAR(report.max_abs_error, 0.1, 1e-6);
  EXPECT_NEAR(report.max_rel_error, 0.05, 1e-6);
  EXPECT_NE(report.ToString().find("FAIL"), std::string::npos);
}

TEST(AttentionCheckTest, NanNeverPasses) {
  const std::vector<float> expected = {1.0f, 2.0f};
  const std::vector<float> actual = {1.0f, NAN};
  const auto report = CompareAttentionOutputs(actual, expected, {.atol = 1, .rtol = 1});
  EXPECT_FALSE(report.passed);
  EXPECT_EQ(report.non_finite, 1);
  EXPECT_EQ(report.worst_index, 1);
  EXPECT_FALSE(CompareAttentionOutputs(std::vector<float>{1.0f}, expected, {}).passed);
}

TEST(AttentionCheckTest, Fp8ToleranceIsLooserThanBf16) {
  const AttentionTolerance bf16 = DefaultTolerance(AttentionDtype::kBf16);
  const AttentionTolerance fp8 = DefaultTolerance(AttentionDtype::kFp8E4m3);
  EXPECT_GT(fp8.atol, bf16.atol);
  EXPECT_GT(fp8.rtol, bf16.rtol);
  EXPECT_GT(fp8.max_rel_l2, bf16.max_rel_l2);
  EXPECT_DOUBLE_EQ(fp8.atol, 6e-2);
  EXPECT_DOUBLE_EQ(fp8.rtol, 6e-2);
  EXPECT_DOUBLE_EQ(fp8.max_rel_l2, 4e-2);
}

}  // namespace
}  // namespace gpuprof::attention
