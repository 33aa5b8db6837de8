// Shapes and buffers of one attention call over a paged KV cache, shared by the prefill, decode
// and reference kernels. No CUDA types: the pointers are device addresses held as void*, the
// lengths are host copies that the launchers plan with (grid sizes, splits) and validate.
//
// Layouts (row-major, element type `dtype` unless said otherwise):
//   Q, O     [total_q, num_qo_heads, head_dim]; sequence b owns rows q_indptr[b]..q_indptr[b+1];
//            O in OutputDtype(dtype) (bf16 for fp8 e4m3 inputs)
//   LSE      [total_q, num_qo_heads] fp32, natural log of sum_j exp(scale * q.k_j), q and k
//            dequantised (times q_scale and k_scale) for fp8
//   K, V     [num_pages, page_size, num_kv_heads, head_dim]; row j of sequence b lives in page
//            page_indices[page_indptr[b] + j / page_size] at slot j % page_size
// Query head h reads KV head h / (num_qo_heads / num_kv_heads) (grouped-query attention).
// Causal masks are aligned bottom-right: query i of a sequence sits at position
// kv_len - q_len + i and sees keys 0..that position, so q_len < kv_len is a chunk of prefill
// over a cached prefix and q_len == 1 is decode.
#ifndef GPUPROF_KERNELS_ATTENTION_ATTENTION_PARAMS_H_
#define GPUPROF_KERNELS_ATTENTION_ATTENTION_PARAMS_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace gpuprof::attention {

// fp8 e4m3 follows FlashAttention-3: Q, K and V stored as __nv_fp8_e4m3 with a dequantisation
// scale per tensor (AttentionShape::q_scale...), O written in bf16.
enum class AttentionDtype { kBf16, kFp16, kFp8E4m3 };

// Bytes per element of `dtype`: 2 for bf16 and fp16, 1 for fp8 e4m3.
int DtypeBytes(AttentionDtype dtype);
// "bf16", "fp16", "fp8-e4m3" (as DataTypeName spells the API's types).
std::string_view DtypeName(AttentionDtype dtype);

// The element type of O for inputs in `dtype`: bf16 for fp8 e4m3, else `dtype` itself.
AttentionDtype OutputDtype(AttentionDtype dtype);
int OutputDtypeBytes(AttentionDtype dtype);

// What every kernel needs to know about the heads and the cache, independent of the batch.
struct AttentionShape {
  int num_qo_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int page_size = 0;  // a power of two; 1, 16, 32 and 64 are tested
  AttentionDtype dtype = AttentionDtype::kBf16;
  bool causal = false;
  // Multiplies q.k before the softmax; 0 means 1/sqrt(head_dim).
  float softmax_scale = 0.0f;
  // Dequantisation scales of fp8 inputs: the real value is the stored one times the scale (per
  // tensor, as FlashAttention-3's descale factors). Always 1 for bf16 and fp16.
  float q_scale = 1.0f;
  float k_scale = 1.0f;
  float v_scale = 1.0f;

  int group_size() const { return num_kv_heads > 0 ? num_qo_heads / num_kv_heads : 0; }
  float EffectiveScale() const;
};

// Host copies of the per-sequence sizes, one entry per sequence.
struct SequenceLengths {
  std::vector<int32_t> q_lens;
  std::vector<int32_t> kv_lens;
  std::vector<int32_t> num_pages;  // pages in the page table of each sequence

  int batch() const { return static_cast<int>(q_lens.size()); }
  int64_t total_q() const;
  int32_t max_q_len() const;
  int32_t max_kv_len() const;
};

// Device buffers of one call. LSE may be null when the caller does not want it.
struct AttentionBuffers {
  const void* q = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  int64_t num_pages = 0;                  // pages in k_cache / v_cache
  const int32_t* q_indptr = nullptr;      // [batch + 1]
  const int32_t* kv_lens = nullptr;       // [batch]
  const int32_t* page_indptr = nullptr;   // [batch + 1]
  const int32_t* page_indices = nullptr;  // [page_indptr[batch]]
  void* o = nullptr;                      // OutputDtype(dtype), or fp32 for the reference
  float* lse = nullptr;                   // optional
};

struct AttentionProblem {
  AttentionShape shape;
  SequenceLengths lengths;
  AttentionBuffers buffers;
};

// Checks heads, head_dim, page size, scales and lengths; the message names the offending field,
// e.g. "num_qo_heads (12) is not a multiple of num_kv_heads (8)". `supported_head_dims` lists what
// the kernel that will run accepts.
absl::Status ValidateAttentionShape(const AttentionShape& shape,
                                    const std::vector<int>& supported_head_dims);
absl::Status ValidateSequenceLengths(const AttentionShape& shape, const SequenceLengths& lengths);
// Both of the above, and the non-null device pointers the kernels dereference.
absl::Status ValidateAttentionProblem(const AttentionProblem& problem,
                                      const std::vector<int>& supported_head_dims);

// (query, key) pairs the softmax covers, summed over sequences and per query head. Causal
// with q_len == kv_len counts q_len * kv_len / 2 (the usual convention, as FLOP counters of
// FlashAttention and PyTorch do); any other causal sequence counts its unmasked pairs exactly.
double AttentionPairs(const AttentionShape& shape, const SequenceLengths& lengths);

// 4 * num_qo_heads * head_dim * pairs: two matrix products of 2 FLOPs per multiply-add.
double AttentionFlops(const AttentionShape& shape, const SequenceLengths& lengths);

// Bytes a kernel must move at least: Q read, K and V rows read once per KV head (not per query
// head), O written (in OutputDtype: 1-byte fp8 inputs, 2-byte O); the LSE's 4 bytes per row are
// left out. Page tables are left out too.
double AttentionBytes(const AttentionShape& shape, const SequenceLengths& lengths);

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_ATTENTION_PARAMS_H_
