#include "workloads/attention/attention_spec.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/data_types.h"
#include "common/status_macros.h"
#include "kernels/attention/head_dims.h"
#include "workloads/spec_checks.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

void ApplyAttentionDefaults(const v1::ListGpusResponse& inventory, v1::ExperimentRequest& request) {
  auto& spec = *request.mutable_attention();
  SetIfZero(spec.phase(), [&] { spec.set_phase(v1::ATTENTION_PHASE_DECODE); });
  const bool decode = spec.phase() == v1::ATTENTION_PHASE_DECODE;
  const bool ragged = spec.q_lens_size() > 0 || spec.kv_lens_size() > 0;
  SetIfZero(spec.batch_size(), [&] {
    spec.set_batch_size(ragged ? std::max(spec.q_lens_size(), spec.kv_lens_size())
                        : decode ? 32
                                 : 1);
  });
  SetIfZero(spec.kv_len(), [&] { spec.set_kv_len(4096); });
  SetIfZero(spec.q_len(), [&] {
    spec.set_q_len(decode ? 1 : std::max(spec.kv_len(), spec.kv_len_max()));
  });
  SetIfZero(spec.num_qo_heads(), [&] { spec.set_num_qo_heads(32); });
  SetIfZero(spec.num_kv_heads(), [&] { spec.set_num_kv_heads(8); });
  SetIfZero(spec.head_dim(), [&] { spec.set_head_dim(128); });
  SetIfZero(spec.page_size(), [&] { spec.set_page_size(16); });
  SetIfZero(spec.dtype(), [&] { spec.set_dtype(v1::DATA_TYPE_BF16); });
  SetIfZero(spec.backend(), [&] { spec.set_backend(v1::ATTENTION_BACKEND_GPUPROF); });
}

// The per-sequence lists and the distribution, each with its field named.
absl::Status ValidateAttentionLengths(const v1::AttentionSpec& spec) {
  const bool decode = spec.phase() == v1::ATTENTION_PHASE_DECODE;
  const bool ragged = spec.q_lens_size() > 0 || spec.kv_lens_size() > 0;
  if (ragged) {
    if (spec.q_lens_size() != spec.kv_lens_size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "attention.kv_lens: got %d entries; must have one per sequence, as q_lens (%d)",
          spec.kv_lens_size(), spec.q_lens_size()));
    }
    if (spec.batch_size() != spec.q_lens_size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "attention.batch_size: got %d; must be the number of q_lens/kv_lens entries (%d) or "
          "unset",
          spec.batch_size(), spec.q_lens_size()));
    }
    if (spec.kv_len_max() != 0) {
      return absl::InvalidArgumentError(
          "attention.kv_len_max: must be unset with per-sequence kv_lens (one or the other)");
    }
    RETURN_IF_ERROR(CheckRange("attention.batch_size", spec.batch_size(), 1, 4096));
    for (int i = 0; i < spec.q_lens_size(); ++i) {
      RETURN_IF_ERROR(CheckRange(absl::StrFormat("attention.kv_lens[%d]", i), spec.kv_lens(i), 1,
                                 int64_t{1} << 20));
      RETURN_IF_ERROR(CheckRange(absl::StrFormat("attention.q_lens[%d]", i), spec.q_lens(i),
                                 decode ? 1 : 0,
                                 decode ? std::min<int64_t>(8, spec.kv_lens(i)) : spec.kv_lens(i)));
    }
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CheckRange("attention.batch_size", spec.batch_size(), 1, 4096));
  RETURN_IF_ERROR(CheckRange("attention.kv_len", spec.kv_len(), 1, int64_t{1} << 20));
  if (spec.kv_len_max() != 0) {
    RETURN_IF_ERROR(
        CheckRange("attention.kv_len_max", spec.kv_len_max(), spec.kv_len(), int64_t{1} << 20));
  }
  const int64_t longest = std::max(spec.kv_len(), spec.kv_len_max());
  if (decode) {
    // One token, or a few draft tokens for speculative decoding.
    return CheckRange("attention.q_len", spec.q_len(), 1, 8);
  }
  return CheckRange("attention.q_len", spec.q_len(), 1, longest);
}

absl::Status ValidateAttentionSpec(const v1::AttentionSpec& spec, int64_t gpu_memory) {
  RETURN_IF_ERROR(ValidateAttentionLengths(spec));
  RETURN_IF_ERROR(CheckRange("attention.num_qo_heads", spec.num_qo_heads(), 1, 256));
  RETURN_IF_ERROR(CheckRange("attention.num_kv_heads", spec.num_kv_heads(), 1, spec.num_qo_heads()));
  if (spec.num_qo_heads() % spec.num_kv_heads() != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "attention.num_kv_heads: got %d; must divide num_qo_heads (%d)", spec.num_kv_heads(),
        spec.num_qo_heads()));
  }
  if (spec.backend() == v1::ATTENTION_BACKEND_CUDNN) {
    // cuDNN's fused fp16/bf16 attention: any multiple of 8 up to 256.
    if (spec.head_dim() % 8 != 0 || spec.head_dim() < 8 || spec.head_dim() > 256) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "attention.head_dim: got %d; the cuDNN backend takes multiples of 8 up to 256",
          spec.head_dim()));
    }
  } else if (!attention::IsAttentionHeadDim(spec.head_dim())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "attention.head_dim: got %d; %s takes %s (the cuDNN backend any multiple of 8 up to 256)",
        spec.head_dim(), spec.phase() == v1::ATTENTION_PHASE_DECODE ? "decode" : "prefill",
        attention::kAttentionHeadDimsText));
  }
  RETURN_IF_ERROR(CheckRange("attention.page_size", spec.page_size(), 1, 1024));
  RETURN_IF_ERROR(CheckPowerOfTwo("attention.page_size", spec.page_size()));
  // fp8 e4m3 (scaled e4m3 Q, K and V, a bf16 O, as FlashAttention-3) has one kernel of ours, the
  // Hopper prefill; the reference runs it too, to check it. The runner checks the GPU.
  const bool prefill = spec.phase() == v1::ATTENTION_PHASE_PREFILL;
  const bool fp8_backend = spec.backend() == v1::ATTENTION_BACKEND_UNSPECIFIED ||
                           spec.backend() == v1::ATTENTION_BACKEND_GPUPROF ||
                           spec.backend() == v1::ATTENTION_BACKEND_REFERENCE;
  if (spec.dtype() == v1::DATA_TYPE_FP8_E4M3 && !(prefill && fp8_backend)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "attention.dtype: got %s; fp8 e4m3 runs only in the prefill phase with the gpuprof or "
        "reference backend, on H100/H200 (sm_90)",
        DataTypeName(spec.dtype())));
  }
  if (spec.dtype() == v1::DATA_TYPE_FP8_E4M3 && spec.backend() != v1::ATTENTION_BACKEND_REFERENCE &&
      spec.page_size() % 16 != 0) {
    // The fp8 kernel loads K and V by TMA in boxes of 16 rows of one page.
    return absl::InvalidArgumentError(absl::StrFormat(
        "attention.page_size: got %d; the fp8 e4m3 prefill takes pages of 16 rows or a multiple "
        "of 16 (bf16 and fp16 take any power of two)",
        spec.page_size()));
  }
  std::vector<v1::DataType> dtypes = {v1::DATA_TYPE_FP16, v1::DATA_TYPE_BF16};
  if (prefill && fp8_backend) dtypes.push_back(v1::DATA_TYPE_FP8_E4M3);
  RETURN_IF_ERROR(CheckDataType("attention.dtype", spec.dtype(), dtypes));
  // The caches hold every sequence's pages: 2 x sum(kv) x heads x head_dim x element bytes (1
  // for fp8).
  int64_t cached_tokens = 0;
  for (int64_t kv_len : ExpandAttentionLengths(spec).kv_lens) cached_tokens += kv_len;
  return CheckBytesFit("attention (paged K and V caches)",
                       {2, cached_tokens, spec.num_kv_heads(), spec.head_dim(),
                        DataTypeBytes(spec.dtype())},
                       gpu_memory, "the GPU's memory");
}

absl::Status ValidateAttention(const v1::ExperimentRequest& request, const HostLimits& limits) {
  // Tensor parallelism splits the heads: both counts must divide by the ranks.
  const int64_t ranks = std::max(1, request.tp_degree());
  if (request.attention().num_kv_heads() % ranks != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "attention.num_kv_heads: got %d; must divide by tp_degree (%d): each rank takes a "
        "share of the KV heads",
        request.attention().num_kv_heads(), ranks));
  }
  return ValidateAttentionSpec(request.attention(), limits.smallest_gpu_memory_bytes);
}

}  // namespace

AttentionLengths ExpandAttentionLengths(const v1::AttentionSpec& spec) {
  AttentionLengths lengths;
  if (spec.q_lens_size() > 0) {
    lengths.q_lens.assign(spec.q_lens().begin(), spec.q_lens().end());
    lengths.kv_lens.assign(spec.kv_lens().begin(), spec.kv_lens().end());
    return lengths;
  }
  std::mt19937_64 random(spec.seed());
  std::uniform_int_distribution<int64_t> drawn(spec.kv_len(), std::max(spec.kv_len(), spec.kv_len_max()));
  for (int64_t i = 0; i < spec.batch_size(); ++i) {
    const int64_t kv_len = spec.kv_len_max() > spec.kv_len() ? drawn(random) : spec.kv_len();
    lengths.kv_lens.push_back(kv_len);
    lengths.q_lens.push_back(std::min(spec.q_len(), kv_len));
  }
  return lengths;
}

absl::Status CheckAttentionDtypeRunsOn(v1::DataType dtype, int compute_major, int compute_minor) {
  if (dtype == v1::DATA_TYPE_FP8_E4M3 && (compute_major != 9 || compute_minor != 0)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "attention.dtype: got %s; fp8 e4m3 runs only on compute capability 9.0 (H100, H200), "
        "and this GPU is %d.%d: use bf16 or fp16 here",
        DataTypeName(dtype), compute_major, compute_minor));
  }
  return absl::OkStatus();
}

// Decode reads the whole KV cache for one query token: bandwidth-bound, judged against the
// copy bandwidth. Prefill reuses each cached token across many queries: compute-bound.
std::optional<Headline> AttentionHeadline(const v1::Experiment& experiment) {
  // The stored request has its defaults applied; an unset phase is the default, decode.
  const bool prefill = experiment.request().attention().phase() == v1::ATTENTION_PHASE_PREFILL;
  std::optional<Headline> headline =
      prefill ? ComputeHeadline(experiment) : BandwidthHeadline(experiment);
  if (headline.has_value()) headline->phase = prefill ? "prefill" : "decode";
  return headline;
}

const WorkloadSpec kAttentionSpec = {
    .request_case = v1::ExperimentRequest::kAttention,
    .workload = v1::WORKLOAD_ATTENTION,
    .uses_gpu = true,
    .supports_tensor_parallelism = true,
    .apply_defaults = &ApplyAttentionDefaults,
    .validate = &ValidateAttention,
    .headline = &AttentionHeadline,
};

}  // namespace gpuprof::workloads
