#include "kernels/attention/attention_params.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpuprof::attention {

int DtypeBytes(AttentionDtype dtype) {
  switch (dtype) {
    case AttentionDtype::kBf16:
    case AttentionDtype::kFp16:
      return 2;
    case AttentionDtype::kFp8E4m3:
      return 1;
  }
  return 0;
}

std::string_view DtypeName(AttentionDtype dtype) {
  switch (dtype) {
    case AttentionDtype::kBf16:
      return "bf16";
    case AttentionDtype::kFp16:
      return "fp16";
    case AttentionDtype::kFp8E4m3:
      return "fp8-e4m3";
  }
  return "unknown";
}

AttentionDtype OutputDtype(AttentionDtype dtype) {
  switch (dtype) {
    case AttentionDtype::kBf16:
    case AttentionDtype::kFp16:
      return dtype;
    case AttentionDtype::kFp8E4m3:
      // An fp8 O would lose what the fp32 accumulators keep; FlashAttention-3 writes bf16.
      return AttentionDtype::kBf16;
  }
  return dtype;
}

int OutputDtypeBytes(AttentionDtype dtype) { return DtypeBytes(OutputDtype(dtype)); }

float AttentionShape::EffectiveScale() const {
  if (softmax_scale != 0.0f) return softmax_scale;
  return head_dim > 0 ? 1.0f / std::sqrt(static_cast<float>(head_dim)) : 0.0f;
}

int64_t SequenceLengths::total_q() const {
  int64_t total = 0;
  for (int32_t q : q_lens) total += q;
  return total;
}

int32_t SequenceLengths::max_q_len() const {
  return q_lens.empty() ? 0 : *std::max_element(q_lens.begin(), q_lens.end());
}

int32_t SequenceLengths::max_kv_len() const {
  return kv_lens.empty() ? 0 : *std::max_element(kv_lens.begin(), kv_lens.end());
}

absl::Status ValidateAttentionShape(const AttentionShape& shape,
                                    const std::vector<int>& supported_head_dims) {
  if (shape.num_qo_heads <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_qo_heads (", shape.num_qo_heads, ") must be positive"));
  }
  if (shape.num_kv_heads <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_kv_heads (", shape.num_kv_heads, ") must be positive"));
  }
  if (shape.num_qo_heads % shape.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_qo_heads (", shape.num_qo_heads,
                                                   ") is not a multiple of num_kv_heads (",
                                                   shape.num_kv_heads, ")"));
  }
  if (std::find(supported_head_dims.begin(), supported_head_dims.end(), shape.head_dim) ==
      supported_head_dims.end()) {
    return absl::InvalidArgumentError(absl::StrCat("head_dim (", shape.head_dim,
                                                   ") is not supported by this kernel (",
                                                   absl::StrJoin(supported_head_dims, ", "), ")"));
  }
  if (shape.page_size <= 0 || (shape.page_size & (shape.page_size - 1)) != 0 ||
      shape.page_size > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("page_size (", shape.page_size,
                                                   ") must be a power of two between 1 and 1024"));
  }
  if (!(shape.softmax_scale >= 0.0f) || std::isinf(shape.softmax_scale)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "softmax_scale (", shape.softmax_scale, ") must be finite and >= 0 (0: 1/sqrt(head_dim))"));
  }
  const std::pair<float, const char*> scales[] = {
      {shape.q_scale, "q_scale"}, {shape.k_scale, "k_scale"}, {shape.v_scale, "v_scale"}};
  for (const auto& [value, name] : scales) {
    if (!(value > 0.0f) || std::isinf(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " (", value, ") must be finite and > 0 (a dequantisation scale)"));
    }
    // Only fp8 kernels read the scales: any other would silently differ from the reference.
    if (shape.dtype != AttentionDtype::kFp8E4m3 && value != 1.0f) {
      return absl::InvalidArgumentError(absl::StrCat(name, " (", value, ") must be 1 for ",
                                                     std::string(DtypeName(shape.dtype)),
                                                     ": the scales dequantise fp8 inputs"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSequenceLengths(const AttentionShape& shape, const SequenceLengths& lengths) {
  const size_t batch = lengths.q_lens.size();
  if (batch == 0) return absl::InvalidArgumentError("q_lens is empty: the batch has no sequence");
  if (lengths.kv_lens.size() != batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv_lens has ", lengths.kv_lens.size(), " entries, q_lens has ", batch));
  }
  if (lengths.num_pages.size() != batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_pages has ", lengths.num_pages.size(), " entries, q_lens has ", batch));
  }
  for (size_t b = 0; b < batch; ++b) {
    const int32_t q = lengths.q_lens[b];
    const int32_t kv = lengths.kv_lens[b];
    if (q < 0) {
      return absl::InvalidArgumentError(absl::StrCat("q_lens[", b, "] (", q, ") is negative"));
    }
    if (kv < 0) {
      return absl::InvalidArgumentError(absl::StrCat("kv_lens[", b, "] (", kv, ") is negative"));
    }
    if (q > 0 && kv == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("kv_lens[", b, "] is 0 but q_lens[", b, "] is ", q, ": no key to attend"));
    }
    if (shape.causal && q > kv) {
      return absl::InvalidArgumentError(
          absl::StrCat("q_lens[", b, "] (", q, ") exceeds kv_lens[", b, "] (", kv,
                       "): a causal query needs its own key in the cache"));
    }
    if (static_cast<int64_t>(lengths.num_pages[b]) * shape.page_size < kv) {
      return absl::InvalidArgumentError(
          absl::StrCat("num_pages[", b, "] (", lengths.num_pages[b], ") x page_size (",
                       shape.page_size, ") does not hold kv_lens[", b, "] (", kv, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateAttentionProblem(const AttentionProblem& problem,
                                      const std::vector<int>& supported_head_dims) {
  if (absl::Status s = ValidateAttentionShape(problem.shape, supported_head_dims); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateSequenceLengths(problem.shape, problem.lengths); !s.ok()) return s;
  const AttentionBuffers& b = problem.buffers;
  const std::pair<const void*, const char*> required[] = {
      {b.q, "buffers.q"},
      {b.k_cache, "buffers.k_cache"},
      {b.v_cache, "buffers.v_cache"},
      {b.q_indptr, "buffers.q_indptr"},
      {b.kv_lens, "buffers.kv_lens"},
      {b.page_indptr, "buffers.page_indptr"},
      {b.page_indices, "buffers.page_indices"},
      {b.o, "buffers.o"},
  };
  for (const auto& [pointer, name] : required) {
    if (pointer == nullptr) return absl::InvalidArgumentError(absl::StrCat(name, " is null"));
  }
  // Pages may be shared between sequences (prefix caching), so their sum bounds nothing.
  if (b.num_pages <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffers.num_pages (", b.num_pages, ") must be positive"));
  }
  return absl::OkStatus();
}

double AttentionPairs(const AttentionShape& shape, const SequenceLengths& lengths) {
  double pairs = 0;
  for (int b = 0; b < lengths.batch(); ++b) {
    const double q = lengths.q_lens[b];
    const double kv = lengths.kv_lens[b];
    if (!shape.causal) {
      pairs += q * kv;
    } else if (q == kv) {
      pairs += q * kv / 2;
    } else {
      // Query i sees kv - q + i + 1 keys.
      pairs += q * (kv - q) + q * (q + 1) / 2;
    }
  }
  return pairs;
}

double AttentionFlops(const AttentionShape& shape, const SequenceLengths& lengths) {
  return 4.0 * shape.num_qo_heads * shape.head_dim * AttentionPairs(shape, lengths);
}

double AttentionBytes(const AttentionShape& shape, const SequenceLengths& lengths) {
  const double element = DtypeBytes(shape.dtype);
  const double q_rows = static_cast<double>(lengths.total_q());
  double kv_rows = 0;
  for (int32_t kv : lengths.kv_lens) kv_rows += kv;
  const double q_and_o =
      q_rows * shape.num_qo_heads * shape.head_dim * (element + OutputDtypeBytes(shape.dtype));
  const double k_and_v = 2.0 * kv_rows * shape.num_kv_heads * shape.head_dim * element;
  return q_and_o + k_and_v;
}

}  // namespace gpuprof::attention
