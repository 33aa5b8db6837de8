// Prefill and decode against the fp32 reference on a GPU, over head sizes, GQA groups, causal
// masks, ragged lengths (q_len < kv_len too), page sizes, dtypes and decode split counts.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "gtest/gtest.h"
#include "kernels/attention/attention_check.h"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/cudnn_attention.h"
#include "kernels/attention/decode.h"
#include "kernels/attention/decode_plan.h"
#include "kernels/attention/decode_tuning.h"
#include "kernels/attention/device_attention_problem.h"
#include "kernels/attention/prefill.h"
#include "kernels/attention/reference.h"

namespace gpuprof::attention {
namespace {

#define ASSERT_OK(expr)                   \
  do {                                    \
    const absl::Status status_ = (expr);  \
    ASSERT_TRUE(status_.ok()) << status_; \
  } while (false)

#define ASSERT_OK_AND_ASSIGN(lhs, expr)            \
  auto lhs##_or = (expr);                          \
  ASSERT_TRUE(lhs##_or.ok()) << lhs##_or.status(); \
  auto lhs = std::move(*lhs##_or)

struct AttentionCase {
  std::string name;
  int num_qo_heads;
  int num_kv_heads;
  int head_dim;
  int page_size;
  AttentionDtype dtype;
  bool causal;
  std::vector<int32_t> q_lens;
  std::vector<int32_t> kv_lens;
  std::vector<int> splits = {1};  // decode only; 0 = heuristic
  bool cudnn_refuses = false;     // cuDNN cases: expected to have no engine
};

void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name; }

AttentionShape ShapeOf(const AttentionCase& c) {
  return AttentionShape{.num_qo_heads = c.num_qo_heads,
                        .num_kv_heads = c.num_kv_heads,
                        .head_dim = c.head_dim,
                        .page_size = c.page_size,
                        .dtype = c.dtype,
                        .causal = c.causal};
}

// Fills the KV rows of each sequence's last page past its kv_len with NaN (0xFF bytes), in K
// and V: a kernel that loads whole pages or boxes must still leave them out of O, since a
// serving engine's cache holds whatever an earlier request left there.
absl::Status PoisonRowsPastEachSequence(const DeviceAttentionProblem& d, cudaStream_t stream) {
  const AttentionShape& shape = d.problem.shape;
  const int64_t row_bytes =
      static_cast<int64_t>(shape.num_kv_heads) * shape.head_dim * DtypeBytes(shape.dtype);
  const std::vector<int32_t>& kv_lens = d.problem.lengths.kv_lens;
  for (int b = 0; b < static_cast<int>(kv_lens.size()); ++b) {
    const int64_t rows =
        static_cast<int64_t>(d.layout.page_indptr[b + 1] - d.layout.page_indptr[b]) *
        shape.page_size;
    for (int64_t j = kv_lens[b]; j < rows; ++j) {
      const int64_t offset = PagedRowIndex(d.layout, shape.page_size, b, j) * row_bytes;
      for (const DeviceBuffer* cache : {&d.k_cache, &d.v_cache}) {
        CUDA_RETURN_IF_ERROR(cudaMemsetAsync(static_cast<uint8_t*>(cache->data()) + offset, 0xFF,
                                             row_bytes, stream));
      }
    }
  }
  return absl::OkStatus();
}

class AttentionGpuTest : public ::testing::TestWithParam<AttentionCase> {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      GTEST_SKIP() << "no GPU";
    }
    auto stream = CudaStream::Create();
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = std::move(*stream);
  }

  // Compares the kernel's O and LSE (in `d.problem.buffers`) with the reference's.
  void ExpectMatchesReference(const DeviceAttentionProblem& d, const std::string& what) {
    const AttentionShape& shape = d.problem.shape;
    const int64_t rows = d.problem.lengths.total_q() * shape.num_qo_heads;
    const int64_t elements = rows * shape.head_dim;
    ASSERT_OK_AND_ASSIGN(out,
                         DownloadAsFloat(d.out.data(), elements, OutputDtype(shape.dtype), false));
    ASSERT_OK_AND_ASSIGN(ref, DownloadAsFloat(d.ref_out.data(), elements, shape.dtype, true));
    ASSERT_OK_AND_ASSIGN(lse, DownloadAsFloat(d.out_lse.data(), rows, shape.dtype, true));
    ASSERT_OK_AND_ASSIGN(ref_lse, DownloadAsFloat(d.ref_lse.data(), rows, shape.dtype, true));
    const AttentionErrorReport o_report =
        CompareAttentionOutputs(out, ref, DefaultTolerance(shape.dtype));
    const AttentionErrorReport lse_report =
        CompareAttentionOutputs(lse, ref_lse, {.atol = 2e-3, .rtol = 1e-3, .max_rel_l2 = 1e-3});
    EXPECT_TRUE(o_report.passed) << what << " O " << o_report.ToString();
    EXPECT_TRUE(lse_report.passed) << what << " LSE " << lse_report.ToString();
    std::printf("[check] %s O %s | LSE max abs %.3g\n", what.c_str(), o_report.ToString().c_str(),
                lse_report.max_abs_error);
  }

  CudaStream stream_;
};

// ---------------------------------------------------------------------------------------------
// Prefill

class PrefillGpuTest : public AttentionGpuTest {};

TEST_P(PrefillGpuTest, MatchesReference) {
  const AttentionCase& c = GetParam();
  const AttentionShape shape = ShapeOf(c);
  ASSERT_OK_AND_ASSIGN(d, MakeDeviceAttentionProblem(
                              shape, SequenceLengths{.q_lens = c.q_lens, .kv_lens = c.kv_lens},
                              /*seed=*/c.q_lens.size() * 131 + c.head_dim));
  ASSERT_OK(PoisonRowsPastEachSequence(d, stream_.get()));
  ASSERT_OK(LaunchReferenceAttention(d.ReferenceProblem(), stream_.get()));
  std::vector<PrefillVariant> variants = ConcretePrefillVariants();
  variants.push_back(PrefillVariant::kAuto);  // whichever this GPU gets, checked the same way
  for (PrefillVariant variant : variants) {
    if (!PrefillVariantTakesHeadDim(variant, c.head_dim)) continue;
    if (!PrefillVariantRunsHere(variant)) {
      std::printf("[skip] %s: %s needs compute capability 9.0\n", c.name.c_str(),
                  std::string(PrefillVariantName(variant)).c_str());
      continue;
    }
    ASSERT_OK(PoisonBuffer(d.out, stream_.get()));
    ASSERT_OK(PoisonBuffer(d.out_lse, stream_.get()));
    ASSERT_OK_AND_ASSIGN(info,
                         LaunchPrefill(d.problem, stream_.get(), variant, d.PrefillScratch()));
    ASSERT_OK(stream_.Synchronize());
    if (variant == PrefillVariant::kAuto) {
      EXPECT_NE(info.variant, PrefillVariant::kAuto);
    } else {
      EXPECT_EQ(info.variant, variant);
    }
    // The cases named for them must reach the order and the split they are there to check
    // (the split where this GPU's SM count leaves a last wave at most half full).
    const bool hopper = info.variant == PrefillVariant::kHopperWgmma;
    EXPECT_EQ(info.tiles_first, hopper && c.name.ends_with("tiles_first")) << info.ToString();
    if (hopper && c.name.ends_with("split_last_wave")) {
      int device = 0, sms = 0;
      ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
      ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
      const int64_t tail = info.blocks % sms;
      if (info.blocks > sms && tail > 0 && 2 * tail <= sms) {
        EXPECT_EQ(info.split_tiles, tail) << info.ToString();
      }
    } else {
      EXPECT_EQ(info.split_tiles, 0) << info.ToString();
    }
    // K/V multicast in pairs of query tiles: head_dim 256, no mask, TMA pages, an even number
    // of 128-row tiles in the longest sequence.
    const int q_tiles = (*std::max_element(c.q_lens.begin(), c.q_lens.end()) + 127) / 128;
    EXPECT_EQ(info.multicast_kv, hopper && c.head_dim == 256 && !c.causal &&
                                     c.page_size % 16 == 0 && q_tiles % 2 == 0)
        << info.ToString();
    // The persistent grids: head_dim 64 (up to 16384 keys) or 128 (16384, an even count of KV
    // tiles), no mask, TMA pages, a uniform batch, more units than SMs; the cases named for
    // them must take them. Whole units of 128 rows at head_dim 128 and at 64 up to eight KV
    // tiles (an even count; where the plain grid's 192-row blocks fill more than a wave, as in
    // every case named here); otherwise at head_dim 64 192-row units, and where the last round
    // of units would leave at least four KV tiles' time of the SMs idle, the last two rounds
    // dealt out by KV tiles (stream-K), cutting units between blocks. The hand-over's flags must
    // be left zero for the next launch.
    if (c.name.find("persistent") != std::string::npos) {
      EXPECT_EQ(info.persistent, hopper) << info.ToString();
      int device = 0, sms = 0;
      ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
      ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
      const int64_t units = static_cast<int64_t>(c.num_qo_heads) * c.q_lens.size() *
                            ((c.q_lens[0] + info.block_m - 1) / info.block_m);
      const int64_t kv_tiles = (c.kv_lens[0] + info.block_n - 1) / info.block_n;
      const int64_t idle_blocks = units % sms == 0 ? 0 : sms - units % sms;
      if (hopper) {
        const bool whole_units = c.head_dim == 128 || (kv_tiles <= 8 && kv_tiles % 2 == 0);
        EXPECT_EQ(info.block_m, whole_units ? 128 : 192) << info.ToString();
        const bool stream_k = c.head_dim == 64 && idle_blocks * kv_tiles >= 4 * sms;
        EXPECT_EQ(info.stream_k_units, stream_k ? units - (units / sms - 1) * sms : 0)
            << info.ToString();
      }
    } else if (info.persistent) {
      EXPECT_TRUE((c.head_dim == 64 || c.head_dim == 128) && !c.causal && c.page_size % 16 == 0)
          << info.ToString();
    }
    if (info.stream_k_units > 0) {
      const size_t flags = PrefillWorkspaceFlagsOffset(c.head_dim);
      std::vector<uint32_t> ready((d.prefill_workspace.bytes() - flags) / 4);
      ASSERT_EQ(cudaMemcpy(ready.data(), d.prefill_workspace.data_as<char>() + flags,
                           ready.size() * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      EXPECT_EQ(std::count(ready.begin(), ready.end(), 0u), static_cast<int64_t>(ready.size()))
          << "hand-over flags left set by " << info.ToString();
    }
    ExpectMatchesReference(d, c.name + " (" + std::string(PrefillVariantName(variant)) + " -> " +
                                  info.ToString() + ")");
  }
}

// One case per line reads better than one field per line.
// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Shapes, PrefillGpuTest,
    ::testing::Values(
        AttentionCase{"d128_gqa4_causal_bf16_page16_ragged", 8, 2, 128, 16,
                      AttentionDtype::kBf16, true, {1, 100, 257, 512}, {1, 100, 257, 512}},
        AttentionCase{"d64_gqa1_noncausal_fp16_page1_qshort", 4, 4, 64, 1, AttentionDtype::kFp16,
                      false, {64, 130}, {64, 300}},
        AttentionCase{"d128_gqa8_causal_fp16_page64_chunked", 8, 1, 128, 64,
                      AttentionDtype::kFp16, true, {37, 128, 200}, {500, 128, 1000}},
        AttentionCase{"d64_gqa8_causal_bf16_page1_chunked", 16, 2, 64, 1, AttentionDtype::kBf16,
                      true, {300}, {777}},
        AttentionCase{"d128_gqa1_noncausal_bf16_page64", 4, 4, 128, 64, AttentionDtype::kBf16,
                      false, {129, 1}, {129, 2000}},
        AttentionCase{"d64_gqa4_causal_fp16_page16_empty_seq", 8, 2, 64, 16,
                      AttentionDtype::kFp16, true, {0, 50, 190}, {10, 60, 190}},
        AttentionCase{"d256_gqa2_causal_bf16_page16_ragged", 8, 4, 256, 16,
                      AttentionDtype::kBf16, true, {1, 77, 300}, {1, 77, 300}},
        AttentionCase{"d256_gqa8_noncausal_fp16_page1_chunked", 8, 1, 256, 1,
                      AttentionDtype::kFp16, false, {50, 129}, {400, 129}},
        AttentionCase{"d128_gqa4_noncausal_fp16_page16_qlong", 8, 2, 128, 16,
                      AttentionDtype::kFp16, false, {300}, {70}},
        AttentionCase{"d128_gqa8_causal_bf16_page16_long", 32, 4, 128, 16, AttentionDtype::kBf16,
                      true, {1024}, {1024}},
        // Ragged batches of several hundred blocks (more than a GPU has SMs): blocks of the
        // shorter sequences' missing tiles, partial last tiles, and at page 8 the Hopper
        // kernel's cp.async producer.
        AttentionCase{"d64_gqa4_noncausal_bf16_page16_many_tiles", 16, 4, 64, 16,
                      AttentionDtype::kBf16, false, {1500, 400, 900}, {1500, 600, 900}},
        AttentionCase{"d128_gqa4_causal_fp16_page16_many_tiles", 16, 4, 128, 16,
                      AttentionDtype::kFp16, true, {1100, 2000, 300}, {1100, 2000, 300}},
        AttentionCase{"d128_gqa2_causal_bf16_page8_many_tiles", 16, 8, 128, 8,
                      AttentionDtype::kBf16, true, {900, 600}, {1000, 600}},
        AttentionCase{"d256_gqa2_noncausal_bf16_page32_many_tiles", 16, 8, 256, 32,
                      AttentionDtype::kBf16, false, {700, 1000}, {900, 1000}},
        // K and V of the 8 KV heads (80 MB at 5000 keys) beyond half of any Hopper L2: the
        // Hopper kernel takes each head's query tiles first.
        AttentionCase{"d256_gqa2_noncausal_bf16_page16_tiles_first", 16, 8, 256, 16,
                      AttentionDtype::kBf16, false, {300, 700}, {5000, 3000}},
        // 192 blocks of 192 rows over 133 KV tiles (past the persistent grid's 128 at head_dim
        // 64): on 132 SMs one whole wave and 60 blocks, which the Hopper kernel runs as 60
        // clusters of two, each block over half the keys.
        AttentionCase{"d64_gqa4_noncausal_bf16_page16_split_last_wave", 32, 8, 64, 16,
                      AttentionDtype::kBf16, false, {1000}, {17000}},
        // Pairs of query tiles sharing K/V by multicast: four waves of clusters, and a ragged
        // batch whose first sequence's last tile (the third) has an empty partner that loads
        // its half of the keys and writes nothing.
        AttentionCase{"d256_gqa2_noncausal_fp16_page16_multicast", 16, 8, 256, 16,
                      AttentionDtype::kFp16, false, {2048}, {2048}},
        AttentionCase{"d256_gqa4_noncausal_bf16_page32_multicast_ragged", 16, 4, 256, 32,
                      AttentionDtype::kBf16, false, {257, 512}, {1000, 512}},
        // The persistent grid at head_dim 128: 320 units (2-3 a block on 132 SMs) with a
        // partial last query tile, and a last KV tile of 104 keys; then 288 units of ten KV
        // tiles (each unit's stages change parity), the last tile 48 keys; then 192 units of 66
        // KV tiles (past 64, up to the grid's 128; the last tile 80 keys); then 512 units of
        // eight. Whole units at head_dim 64: 256 units of eight KV tiles (the last 104 keys)
        // and 512 of six (the last 60). The stream-K grid at head_dim 64 (192-row units, four
        // stages), each case dealing its last two rounds out by KV tiles on 132 SMs: 192 units
        // of nine KV tiles (the last 76 keys), 176 of 17 (one more than 2k tokens' 16, a count
        // the four stages do not divide; the last 52 keys), 704 of 32 (4k tokens), and 176 of
        // 63 (the last 64 keys), each block's pieces running on through the stages.
        AttentionCase{"d128_gqa4_noncausal_bf16_page16_persistent", 32, 8, 128, 16,
                      AttentionDtype::kBf16, false, {600, 600}, {1000, 1000}},
        AttentionCase{"d128_gqa4_noncausal_fp16_page32_persistent_chunked", 32, 8, 128, 32,
                      AttentionDtype::kFp16, false, {300, 300, 300}, {1200, 1200, 1200}},
        AttentionCase{"d128_gqa4_noncausal_bf16_page16_persistent_long", 32, 8, 128, 16,
                      AttentionDtype::kBf16, false, {300, 300}, {8400, 8400}},
        AttentionCase{"d128_gqa4_noncausal_fp16_page16_persistent_whole_rounds", 32, 8, 128, 16,
                      AttentionDtype::kFp16, false, {1000, 1000}, {1000, 1000}},
        AttentionCase{"d64_gqa4_noncausal_bf16_page16_persistent_whole_units", 32, 8, 64, 16,
                      AttentionDtype::kBf16, false, {500, 500}, {1000, 1000}},
        AttentionCase{"d64_gqa8_noncausal_fp16_page32_persistent_whole_units_short", 64, 8, 64,
                      32, AttentionDtype::kFp16, false, {1000}, {700}},
        AttentionCase{"d64_gqa4_noncausal_bf16_page16_persistent", 32, 8, 64, 16,
                      AttentionDtype::kBf16, false, {500, 500}, {1100, 1100}},
        AttentionCase{"d64_gqa8_noncausal_fp16_page32_persistent_chunked", 16, 2, 64, 32,
                      AttentionDtype::kFp16, false, {2000}, {2100}},
        AttentionCase{"d64_gqa4_noncausal_fp16_page32_persistent_4k", 32, 8, 64, 32,
                      AttentionDtype::kFp16, false, {4096}, {4096}},
        AttentionCase{"d64_gqa2_noncausal_bf16_page16_persistent_long", 16, 8, 64, 16,
                      AttentionDtype::kBf16, false, {2000}, {8000}}),
    [](const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name; });
// clang-format on

// ---------------------------------------------------------------------------------------------
// fp8 (e4m3) prefill: Q, K, V in e4m3 with a scale each, O in bf16; Hopper only. The reference
// reads the same e4m3 values and scales them in fp32, so what is measured is the kernel's own
// error (P rounded to e4m3 before P V), against the fp8 tolerance.

class Fp8PrefillGpuTest : public AttentionGpuTest {};

TEST_P(Fp8PrefillGpuTest, MatchesReference) {
  const AttentionCase& c = GetParam();
  ASSERT_EQ(c.dtype, AttentionDtype::kFp8E4m3);
  ASSERT_OK_AND_ASSIGN(d, MakeDeviceAttentionProblem(
                              ShapeOf(c), SequenceLengths{.q_lens = c.q_lens, .kv_lens = c.kv_lens},
                              /*seed=*/c.q_lens.size() * 131 + c.head_dim));
  ASSERT_NE(d.problem.shape.k_scale, 1.0f) << "the inputs should exercise the scales";
  if (!PrefillVariantRunsHere(PrefillVariant::kHopperWgmma)) {
    const auto refused = LaunchPrefill(d.problem, stream_.get());
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("fp8-e4m3"), std::string::npos) << refused.status();
    GTEST_SKIP() << "fp8 prefill needs compute capability 9.0; refused: " << refused.status();
  }
  ASSERT_OK(PoisonRowsPastEachSequence(d, stream_.get()));
  ASSERT_OK(LaunchReferenceAttention(d.ReferenceProblem(), stream_.get()));
  ASSERT_OK_AND_ASSIGN(info, LaunchPrefill(d.problem, stream_.get()));
  ASSERT_OK(stream_.Synchronize());
  EXPECT_EQ(info.variant, PrefillVariant::kHopperWgmma);
  ExpectMatchesReference(d, c.name + " (" + info.ToString() + ")");
}

// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Shapes, Fp8PrefillGpuTest,
    ::testing::Values(
        AttentionCase{"d128_gqa4_causal_fp8_page16_ragged", 8, 2, 128, 16,
                      AttentionDtype::kFp8E4m3, true, {1, 100, 257, 512}, {1, 100, 257, 512}},
        AttentionCase{"d128_gqa8_causal_fp8_page64_chunked", 8, 1, 128, 64,
                      AttentionDtype::kFp8E4m3, true, {37, 128, 200}, {500, 128, 1000}},
        AttentionCase{"d128_gqa1_noncausal_fp8_page32", 4, 4, 128, 32, AttentionDtype::kFp8E4m3,
                      false, {129, 1}, {129, 2000}},
        AttentionCase{"d128_gqa4_noncausal_fp8_page16_qlong_empty_seq", 8, 2, 128, 16,
                      AttentionDtype::kFp8E4m3, false, {300, 0, 17}, {70, 5, 17}},
        AttentionCase{"d128_gqa8_causal_fp8_page16_long", 32, 4, 128, 16,
                      AttentionDtype::kFp8E4m3, true, {1024}, {1024}},
        AttentionCase{"d128_gqa4_causal_fp8_page16_many_tiles", 16, 4, 128, 16,
                      AttentionDtype::kFp8E4m3, true, {1100, 2000, 300}, {1100, 2000, 300}},
        AttentionCase{"d128_gqa2_noncausal_fp8_page256_many_tiles", 16, 8, 128, 256,
                      AttentionDtype::kFp8E4m3, false, {700, 1000}, {900, 1000}},
        AttentionCase{"d64_gqa4_causal_fp8_page16_ragged", 8, 2, 64, 16,
                      AttentionDtype::kFp8E4m3, true, {1, 100, 257, 512}, {1, 100, 257, 512}},
        AttentionCase{"d64_gqa4_noncausal_fp8_page32_many_tiles", 16, 4, 64, 32,
                      AttentionDtype::kFp8E4m3, false, {1500, 400, 900}, {1500, 600, 900}},
        AttentionCase{"d256_gqa2_causal_fp8_page16_ragged", 8, 4, 256, 16,
                      AttentionDtype::kFp8E4m3, true, {1, 77, 300}, {1, 77, 300}},
        AttentionCase{"d256_gqa2_noncausal_fp8_page32_many_tiles", 16, 8, 256, 32,
                      AttentionDtype::kFp8E4m3, false, {700, 1000}, {900, 1000}}),
    [](const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name; });
// clang-format on

// What the fp8 kernel does not take is refused with the field named, before any GPU work.
TEST_F(AttentionGpuTest, Fp8PrefillRefusesWhatItDoesNotTake) {
  const AttentionShape fp8{.num_qo_heads = 8,
                           .num_kv_heads = 8,
                           .head_dim = 128,
                           .page_size = 16,
                           .dtype = AttentionDtype::kFp8E4m3,
                           .causal = true};
  ASSERT_OK_AND_ASSIGN(d, MakeDeviceAttentionProblem(
                              fp8, SequenceLengths{.q_lens = {20}, .kv_lens = {40}}, 1));
  AttentionProblem page8 = d.problem;
  page8.shape.page_size = 8;
  page8.lengths.num_pages = {5};
  const auto page_refused = LaunchPrefill(page8, stream_.get());
  ASSERT_FALSE(page_refused.ok());
  EXPECT_NE(page_refused.status().message().find("page_size"), std::string::npos)
      << page_refused.status();
  AttentionProblem d96 = d.problem;
  d96.shape.head_dim = 96;
  const auto head_refused = LaunchPrefill(d96, stream_.get());
  ASSERT_FALSE(head_refused.ok());
  EXPECT_NE(head_refused.status().message().find("head_dim"), std::string::npos)
      << head_refused.status();
  const auto variant_refused =
      LaunchPrefill(d.problem, stream_.get(), PrefillVariant::kTwoRowTiles);
  ASSERT_FALSE(variant_refused.ok());
  EXPECT_NE(variant_refused.status().message().find("fp8-e4m3"), std::string::npos)
      << variant_refused.status();
  const auto decode_refused = LaunchDecode(d.problem, {}, stream_.get());
  EXPECT_FALSE(decode_refused.ok());
}

// ---------------------------------------------------------------------------------------------
// Decode

class DecodeGpuTest : public AttentionGpuTest {
 protected:
  static int ComputeMajor() {
    int device = 0, major = 0;
    EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
    EXPECT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
              cudaSuccess);
    return major;
  }
};

TEST_P(DecodeGpuTest, MatchesReference) {
  const AttentionCase& c = GetParam();
  const AttentionShape shape = ShapeOf(c);
  ASSERT_OK_AND_ASSIGN(d, MakeDeviceAttentionProblem(
                              shape, SequenceLengths{.q_lens = c.q_lens, .kv_lens = c.kv_lens},
                              /*seed=*/c.kv_lens.size() * 17 + c.head_dim));
  ASSERT_OK(PoisonRowsPastEachSequence(d, stream_.get()));
  ASSERT_OK(LaunchReferenceAttention(d.ReferenceProblem(), stream_.get()));
  const size_t workspace_bytes = DecodeWorkspaceBytes(shape, d.problem.lengths, kMaxDecodeSplits);
  ASSERT_OK_AND_ASSIGN(workspace, DeviceBuffer::Allocate(std::max<size_t>(workspace_bytes, 16)));
  const int rows =
      c.num_qo_heads / c.num_kv_heads * *std::max_element(c.q_lens.begin(), c.q_lens.end());
  const int major = ComputeMajor();
  auto takes = [&](DecodeKernelChoice kernel) {
    return DecodeKernelTakes(kernel, c.head_dim, c.page_size, rows, major);
  };
  // Every kernel forced, the plan's choice with the merge launched after the split kernel (as
  // on GPUs without programmatic launches) as well as overlapping it, and the tensor-core
  // kernels with halving splits (empty ones too where the splits outnumber the key tiles).
  struct Variant {
    DecodeKernelChoice kernel;
    bool overlap_merge = true;
    bool halving_splits = false;
  };
  for (int splits : c.splits) {
    for (const Variant& variant :
         {Variant{DecodeKernelChoice::kAuto}, Variant{DecodeKernelChoice::kPlain},
          Variant{DecodeKernelChoice::kPrefetch}, Variant{DecodeKernelChoice::kTensorCores},
          Variant{DecodeKernelChoice::kTensorCoresLongTiles},
          Variant{DecodeKernelChoice::kTensorCoresTma},
          Variant{DecodeKernelChoice::kTensorCoresLongTilesTma},
          Variant{DecodeKernelChoice::kAuto, false},
          Variant{DecodeKernelChoice::kTensorCores, true, true},
          Variant{DecodeKernelChoice::kTensorCoresLongTiles, true, true},
          Variant{DecodeKernelChoice::kTensorCoresTma, true, true},
          Variant{DecodeKernelChoice::kTensorCoresLongTilesTma, true, true},
          Variant{DecodeKernelChoice::kPlain, true, true}}) {
      const DecodeKernelChoice kernel = variant.kernel;
      const DecodeOptions options{.num_splits = splits,
                                  .workspace = workspace.data(),
                                  .workspace_bytes = workspace.bytes(),
                                  .kernel = kernel,
                                  .overlap_merge = variant.overlap_merge,
                                  .halving_splits = variant.halving_splits};
      if (!takes(kernel) || (variant.halving_splits && !IsTensorCoreDecode(kernel))) {
        const absl::StatusOr<DecodeLaunchInfo> refused =
            LaunchDecode(d.problem, options, stream_.get());
        EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
            << DecodeKernelChoiceName(kernel) << ": " << refused.status();
        if (takes(kernel)) {
          EXPECT_NE(refused.status().message().find("halving_splits"), std::string::npos)
              << refused.status();
        }
        continue;  // outside the kernel's shapes, and refused so
      }
      ASSERT_OK(PoisonBuffer(d.out, stream_.get()));
      ASSERT_OK(PoisonBuffer(d.out_lse, stream_.get()));
      ASSERT_OK_AND_ASSIGN(info, LaunchDecode(d.problem, options, stream_.get()));
      ASSERT_OK(stream_.Synchronize());
      if (kernel != DecodeKernelChoice::kAuto) {
        EXPECT_EQ(info.plan.prefetch, kernel == DecodeKernelChoice::kPrefetch);
        EXPECT_EQ(info.plan.tensor_cores, IsTensorCoreDecode(kernel));
        EXPECT_EQ(info.plan.long_tiles, kernel == DecodeKernelChoice::kTensorCoresLongTiles ||
                                            kernel == DecodeKernelChoice::kTensorCoresLongTilesTma);
        EXPECT_EQ(info.plan.tma, kernel == DecodeKernelChoice::kTensorCoresTma ||
                                     kernel == DecodeKernelChoice::kTensorCoresLongTilesTma);
      }
      if (!variant.overlap_merge) {
        EXPECT_FALSE(info.merge_overlapped);
      }
      EXPECT_EQ(info.plan.halving_splits, variant.halving_splits && info.plan.num_splits > 1);
      if (splits > 0) {
        EXPECT_EQ(info.plan.num_splits, std::min(splits, d.problem.lengths.max_kv_len()));
      }
      ExpectMatchesReference(d, absl::StrCat(c.name, " requested splits ", splits,
                                             variant.overlap_merge ? "" : ", merge after", " (",
                                             info.ToString(), ")"));
    }
  }

  // Tuning times every kernel that takes the shape, each at its split candidates, and names
  // the fastest pair, which then runs.
  const DecodeOptions options{.workspace = workspace.data(), .workspace_bytes = workspace.bytes()};
  ASSERT_OK_AND_ASSIGN(tuning, TuneDecodeKernel(d.problem, options, stream_.get(), 3));
  EXPECT_TRUE(tuning.l2_flushed) << tuning.ToString();
  std::set<DecodeKernelChoice> kernels;
  int planned = 0;
  bool fastest_is_a_candidate = false;
  for (const DecodeTuning::Candidate& candidate : tuning.candidates) {
    EXPECT_GT(candidate.median_us, 0.0) << tuning.ToString();
    kernels.insert(candidate.kernel);
    planned += candidate.planned ? 1 : 0;
    fastest_is_a_candidate |= candidate.kernel == tuning.fastest.kernel &&
                              candidate.num_splits == tuning.fastest.num_splits &&
                              candidate.halving_splits == tuning.fastest.halving_splits;
  }
  size_t tensor_core_kernels = 0;
  for (DecodeKernelChoice kernel :
       {DecodeKernelChoice::kTensorCores, DecodeKernelChoice::kTensorCoresLongTiles,
        DecodeKernelChoice::kTensorCoresTma, DecodeKernelChoice::kTensorCoresLongTilesTma}) {
    tensor_core_kernels += takes(kernel) ? 1 : 0;
  }
  EXPECT_EQ(kernels.size(), 2u + tensor_core_kernels) << tuning.ToString();
  EXPECT_EQ(planned, static_cast<int>(kernels.size())) << tuning.ToString();
  EXPECT_TRUE(fastest_is_a_candidate) << tuning.ToString();
  ASSERT_OK(PoisonBuffer(d.out, stream_.get()));
  ASSERT_OK_AND_ASSIGN(info, LaunchDecode(d.problem, tuning.Apply(options), stream_.get()));
  ASSERT_OK(stream_.Synchronize());
  EXPECT_EQ(info.plan.num_splits, tuning.fastest.num_splits) << tuning.ToString();
  EXPECT_EQ(info.plan.halving_splits, tuning.fastest.halving_splits) << tuning.ToString();
  ExpectMatchesReference(d, absl::StrCat(c.name, " tuned (", tuning.ToString(), ")"));
}

// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Shapes, DecodeGpuTest,
    ::testing::Values(
        AttentionCase{"d128_gqa4_bf16_page16_ragged", 32, 8, 128, 16, AttentionDtype::kBf16,
                      true, {1, 1, 1, 1, 1}, {1, 17, 1000, 4096, 333}, {1, 0, 7}},
        AttentionCase{"d64_gqa1_fp16_page1", 4, 4, 64, 1, AttentionDtype::kFp16, true,
                      {1, 1, 1}, {5, 64, 2500}, {1, 0, 16}},
        AttentionCase{"d128_gqa8_fp16_page64", 8, 1, 128, 64, AttentionDtype::kFp16, false,
                      {1, 1}, {8000, 100}, {1, 0}},
        AttentionCase{"d256_gqa2_bf16_page32", 4, 2, 256, 32, AttentionDtype::kBf16, true,
                      {1, 1}, {300, 1500}, {1, 0, 5}},
        AttentionCase{"d128_gqa4_bf16_page16_spec_causal", 16, 4, 128, 16,
                      AttentionDtype::kBf16, true, {4, 8, 1}, {100, 900, 50}, {1, 3}},
        AttentionCase{"d64_gqa1_fp16_page64_spec_causal", 4, 4, 64, 64, AttentionDtype::kFp16,
                      true, {8, 2}, {8, 3000}, {1, 0}},
        AttentionCase{"d128_gqa8_bf16_page1_spec_noncausal", 16, 2, 128, 1,
                      AttentionDtype::kBf16, false, {2, 2}, {700, 64}, {1, 4}},
        // Groups that are not a power of two: blocks of exactly 5, 7, 3 + 3 draft rows
        // (9: two blocks of 5, the second with 4) and 6 x 2 drafts (two blocks of 6).
        AttentionCase{"d128_gqa5_bf16_page16", 10, 2, 128, 16, AttentionDtype::kBf16, true,
                      {1, 1, 1}, {1, 700, 4100}, {1, 0, 3}},
        AttentionCase{"d64_gqa7_fp16_page16", 7, 1, 64, 16, AttentionDtype::kFp16, true,
                      {1, 1}, {300, 3000}, {1, 0}},
        AttentionCase{"d128_gqa3_bf16_page16_spec_causal", 6, 2, 128, 16,
                      AttentionDtype::kBf16, true, {3, 1}, {50, 2000}, {1, 0}},
        AttentionCase{"d256_gqa6_bf16_page16_spec_causal", 12, 2, 256, 16,
                      AttentionDtype::kBf16, true, {2, 1}, {900, 33}, {1, 0}},
        // Head_dim 256 on tensor cores holds 8 rows a block (the query rows as the mma's 8
        // columns): a group of 8, and 4 heads x 2 causal drafts.
        AttentionCase{"d256_gqa8_bf16_page16", 16, 2, 256, 16, AttentionDtype::kBf16, true,
                      {1, 1, 1}, {1, 700, 3000}, {1, 0, 4}},
        AttentionCase{"d256_gqa4_fp16_page1_spec_causal", 8, 2, 256, 1, AttentionDtype::kFp16,
                      true, {2, 1}, {40, 1500}, {1, 0}},
        // Head_dim 256, 16 rows: two blocks of 8 a KV head (the 12-row case above too).
        AttentionCase{"d256_gqa16_bf16_page16", 32, 2, 256, 16, AttentionDtype::kBf16, false,
                      {1, 1}, {500, 2100}, {1, 0, 3}},
        // 12 rows at head_dim 64: the 16-row tensor-core kernel takes them, the long-tile one
        // (up to 8 rows) refuses them.
        AttentionCase{"d64_gqa4_bf16_page16_spec_causal", 8, 2, 64, 16, AttentionDtype::kBf16,
                      true, {3, 1}, {77, 1200}, {1, 0}},
        // The long-tile kernels' 8 rows; by TMA, a 32-key tile as two boxes of one 32-row page,
        // a sequence of one key, and splits of 32-key multiples ending mid-tile.
        AttentionCase{"d64_gqa8_bf16_page32", 16, 2, 64, 32, AttentionDtype::kBf16, true,
                      {1, 1, 1}, {1, 45, 5000}, {1, 0, 5}}),
    [](const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name; });
// clang-format on

// ---------------------------------------------------------------------------------------------
// cuDNN's fused attention on the same paged inputs, against the same reference. A case cuDNN
// has no engine for must say so with cuDNN's reason; the others must match.

class CudnnGpuTest : public AttentionGpuTest {};

TEST_P(CudnnGpuTest, MatchesReferenceOrSaysWhyNot) {
  const auto version = CudnnVersion();
  if (!version.ok()) GTEST_SKIP() << version.status();
  const AttentionCase& c = GetParam();
  // Scattered pages (read through the page table), then pages in order (read in place).
  for (const uint64_t seed : {uint64_t{c.q_lens.size() * 71 + c.head_dim}, uint64_t{0}}) {
    const std::string name = c.name + (seed == 0 ? " pages in order" : " pages scattered");
    SCOPED_TRACE(name);
    ASSERT_OK_AND_ASSIGN(
        d, MakeDeviceAttentionProblem(
               ShapeOf(c), SequenceLengths{.q_lens = c.q_lens, .kv_lens = c.kv_lens}, seed));
    ASSERT_OK(LaunchReferenceAttention(d.ReferenceProblem(), stream_.get()));
    ASSERT_OK(PoisonBuffer(d.out, stream_.get()));
    ASSERT_OK(PoisonBuffer(d.out_lse, stream_.get()));
    const auto cudnn = CudnnAttention::Create(d.problem, d.layout);
    if (c.cudnn_refuses) {
      ASSERT_FALSE(cudnn.ok()) << name << " was expected to be refused by cuDNN " << *version;
      EXPECT_NE(cudnn.status().message().find("cuDNN"), std::string::npos) << cudnn.status();
      std::printf("[cudnn] %s refused: %s\n", name.c_str(), cudnn.status().ToString().c_str());
      continue;
    }
    ASSERT_TRUE(cudnn.ok()) << name << ": " << cudnn.status();
    // Scattered pages can only be read through the page table; pages in order either way,
    // whichever cuDNN ran faster.
    if (seed != 0) {
      EXPECT_FALSE((*cudnn)->info().reads_kv_in_place);
    }
    ASSERT_OK((*cudnn)->Run(stream_.get()));
    ASSERT_OK(stream_.Synchronize());
    ExpectMatchesReference(d, name + " (" + (*cudnn)->info().ToString() + ")");
  }
}

// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Shapes, CudnnGpuTest,
    ::testing::Values(
        AttentionCase{"prefill_d128_gqa4_causal_bf16_page16_ragged", 8, 2, 128, 16,
                      AttentionDtype::kBf16, true, {1, 100, 257, 512}, {1, 100, 257, 512}},
        AttentionCase{"prefill_d64_gqa1_noncausal_fp16_page16_qshort", 4, 4, 64, 16,
                      AttentionDtype::kFp16, false, {64, 130}, {64, 300}},
        AttentionCase{"prefill_d128_gqa8_causal_fp16_page64_chunked", 8, 1, 128, 64,
                      AttentionDtype::kFp16, true, {37, 128, 200}, {500, 128, 1000}},
        AttentionCase{"prefill_d128_gqa8_causal_bf16_page16_long", 32, 4, 128, 16,
                      AttentionDtype::kBf16, true, {1024}, {1024}},
        AttentionCase{"decode_d128_gqa4_bf16_page16_ragged", 32, 8, 128, 16, AttentionDtype::kBf16,
                      true, {1, 1, 1, 1, 1}, {1, 17, 1000, 4096, 333}},
        AttentionCase{"decode_d128_gqa8_fp16_page64", 8, 1, 128, 64, AttentionDtype::kFp16, false,
                      {1, 1}, {8000, 100}},
        AttentionCase{"decode_d128_gqa4_bf16_page16_spec_causal", 16, 4, 128, 16,
                      AttentionDtype::kBf16, true, {4, 8, 1}, {100, 900, 50}}),
    [](const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name; });
// clang-format on

// ---------------------------------------------------------------------------------------------
// Errors reach the caller as statuses, before any GPU work.

TEST_F(AttentionGpuTest, RejectsBadShapesWithFieldNames) {
  const AttentionShape shape{.num_qo_heads = 12,
                             .num_kv_heads = 8,
                             .head_dim = 128,
                             .page_size = 16,
                             .dtype = AttentionDtype::kBf16,
                             .causal = true};
  ASSERT_OK_AND_ASSIGN(
      d, MakeDeviceAttentionProblem(
             AttentionShape{.num_qo_heads = 8, .num_kv_heads = 8, .head_dim = 128, .page_size = 16},
             SequenceLengths{.q_lens = {1}, .kv_lens = {16}}, 1));
  AttentionProblem bad = d.problem;
  bad.shape = shape;
  const auto prefill = LaunchPrefill(bad, stream_.get());
  EXPECT_FALSE(prefill.ok());
  EXPECT_NE(prefill.status().message().find("num_kv_heads"), std::string::npos);
  AttentionProblem long_q = d.problem;
  long_q.lengths.q_lens = {9};
  long_q.lengths.kv_lens = {16};
  const auto decode = LaunchDecode(long_q, {}, stream_.get());
  EXPECT_FALSE(decode.ok());
  EXPECT_NE(decode.status().message().find("q_lens[0]"), std::string::npos);
  AttentionProblem d96 = d.problem;
  d96.shape.head_dim = 96;
  EXPECT_FALSE(LaunchPrefill(d96, stream_.get()).ok());
}

}  // namespace
}  // namespace gpuprof::attention
