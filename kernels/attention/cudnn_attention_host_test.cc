// The cuDNN backend's host side: the index arrays it uploads, and its attention graph, which
// cuDNN validates tensor by tensor and operation by operation without a GPU. Skipped where
// cuDNN is not installed.
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/cudnn_attention.h"
#include "kernels/attention/paged_layout.h"

namespace gpuprof::attention {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

AttentionShape Shape(int qo_heads, int kv_heads, int head_dim, int page_size, bool causal,
                     AttentionDtype dtype = AttentionDtype::kBf16) {
  return AttentionShape{.num_qo_heads = qo_heads,
                        .num_kv_heads = kv_heads,
                        .head_dim = head_dim,
                        .page_size = page_size,
                        .dtype = dtype,
                        .causal = causal};
}

TEST(CudnnIndexArraysTest, RaggedOffsetsAndAPaddedPageTable) {
  SequenceLengths lengths{.q_lens = {3, 0, 5}, .kv_lens = {40, 16, 5}};
  const auto layout = BuildPagedLayout(lengths, /*page_size=*/16, /*seed=*/0);
  ASSERT_TRUE(layout.ok()) << layout.status();
  const auto arrays = BuildCudnnIndexArrays(Shape(4, 2, 8, 16, true), lengths, *layout);
  ASSERT_TRUE(arrays.ok()) << arrays.status();
  // Rows 0, 3, 3, 8 of Q; 4 heads x 8 elements per row.
  EXPECT_THAT(arrays->q_offsets, ElementsAre(0, 96, 96, 256));
  EXPECT_THAT(arrays->lse_offsets, ElementsAre(0, 12, 12, 32));
  // 3, 1 and 1 pages, in order (seed 0), padded to 3 per sequence.
  EXPECT_EQ(arrays->max_pages, 3);
  EXPECT_THAT(arrays->page_table, ElementsAre(0, 1, 2, 3, 0, 0, 4, 0, 0));
  // Pages in order: K and V read in place from rows 0, 48, 64 (and the end, 80); 2 KV heads x
  // 8 elements per row.
  EXPECT_THAT(arrays->kv_offsets, ElementsAre(0, 768, 1024, 1280));
}

TEST(CudnnIndexArraysTest, ShuffledPagesKeepTheirOrderWithinASequence) {
  SequenceLengths lengths{.q_lens = {1, 1}, .kv_lens = {64, 33}};
  const auto layout = BuildPagedLayout(lengths, 16, /*seed=*/7);
  ASSERT_TRUE(layout.ok());
  const auto arrays = BuildCudnnIndexArrays(Shape(8, 8, 64, 16, false), lengths, *layout);
  ASSERT_TRUE(arrays.ok());
  ASSERT_EQ(arrays->max_pages, 4);
  for (int s = 0; s < 2; ++s) {
    for (int p = layout->page_indptr[s]; p < layout->page_indptr[s + 1]; ++p) {
      EXPECT_EQ(arrays->page_table[s * 4 + p - layout->page_indptr[s]], layout->page_indices[p]);
    }
  }
  // Scattered pages are read through the page table only.
  EXPECT_THAT(arrays->kv_offsets, IsEmpty());
}

TEST(CudnnIndexArraysTest, RefusesALayoutForAnotherBatch) {
  SequenceLengths lengths{.q_lens = {1}, .kv_lens = {8}};
  const auto layout = BuildPagedLayout(lengths, 16, 0);
  ASSERT_TRUE(layout.ok());
  SequenceLengths more{.q_lens = {1, 1}, .kv_lens = {8, 8}};
  const auto arrays = BuildCudnnIndexArrays(Shape(4, 4, 64, 16, false), more, *layout);
  ASSERT_FALSE(arrays.ok());
  EXPECT_THAT(arrays.status().message(), HasSubstr("1 page tables for 2 sequences"));
}

// Before cuDNN is loaded: the answer is the same with or without it.
TEST(CudnnAttentionTest, RefusesFp8NamingTheDtype) {
  SequenceLengths lengths{.q_lens = {128}, .kv_lens = {128}};
  const absl::Status status = CheckCudnnAttentionGraph(
      Shape(8, 8, 128, 16, true, AttentionDtype::kFp8E4m3), lengths, 8, false);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("dtype: got fp8-e4m3; the cuDNN backend takes bf16 or fp16"));
}

class CudnnGraphTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto version = CudnnVersion();
    if (!version.ok()) GTEST_SKIP() << version.status();
  }
};

// Every graph the backend builds (prefill and decode, causal or not, with and without the LSE,
// bf16 and fp16, GQA groups, page sizes) is one cuDNN accepts as a graph.
TEST_F(CudnnGraphTest, CudnnAcceptsTheGraphsTheBackendBuilds) {
  struct Case {
    AttentionShape shape;
    SequenceLengths lengths;
    bool with_lse;
  };
  const std::vector<Case> cases = {
      {Shape(32, 8, 128, 16, true), {.q_lens = {4096}, .kv_lens = {4096}}, true},
      {Shape(32, 8, 128, 16, false), {.q_lens = {1, 1}, .kv_lens = {4096, 4096}}, false},
      {Shape(32, 8, 128, 16, true), {.q_lens = {4, 4}, .kv_lens = {100, 100}}, true},
      {Shape(32, 8, 128, 16, false), {.q_lens = {100, 257}, .kv_lens = {100, 300}}, false},
      {Shape(8, 1, 64, 64, true, AttentionDtype::kFp16),
       {.q_lens = {37, 128}, .kv_lens = {500, 128}},
       true},
      {Shape(32, 8, 128, 16, false), {.q_lens = {1, 1, 1}, .kv_lens = {4096, 17, 1}}, true},
      {Shape(16, 4, 128, 32, true), {.q_lens = {4, 8}, .kv_lens = {100, 900}}, false},
  };
  for (const Case& c : cases) {
    SequenceLengths lengths = c.lengths;
    const auto layout = BuildPagedLayout(lengths, c.shape.page_size, 1);
    ASSERT_TRUE(layout.ok());
    for (bool kv_in_place : {false, true}) {
      const absl::Status status = CheckCudnnAttentionGraph(c.shape, lengths, layout->num_pages,
                                                           c.with_lse, kv_in_place);
      EXPECT_TRUE(status.ok()) << "heads " << c.shape.num_qo_heads << "/"
                               << c.shape.num_kv_heads << " d" << c.shape.head_dim << " causal "
                               << c.shape.causal << " kv in place " << kv_in_place << ": "
                               << status;
    }
  }
}

}  // namespace
}  // namespace gpuprof::attention
