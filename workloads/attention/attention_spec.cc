#include "workloads/attention/attention_spec.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_format.h"
#include "common/data_types.h"
#include "common/status_macros.h"
#include "workloads/spec_checks.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

void ApplyAttentionDefaults(const v1::ListGpusResponse& inventory, v1::ExperimentRequest& request) {
  auto& spec = *request.mutable_attention();
  SetIfZero(spec.phase(), [&] { spec.set_phase(v1::ATTENTION_PHASE_DECODE); });
  const bool decode = spec.phase() == v1::ATTENTION_PHASE_DECODE;
  SetIfZero(spec.batch_size(), [&] { spec.set_batch_size(decode ? 32 : 1); });
  SetIfZero(spec.kv_len(), [&] { spec.set_kv_len(4096); });
  SetIfZero(spec.q_len(), [&] { spec.set_q_len(decode ? 1 : spec.kv_len()); });
  SetIfZero(spec.num_qo_heads(), [&] { spec.set_num_qo_heads(32); });
  SetIfZero(spec.num_kv_heads(), [&] { spec.set_num_kv_heads(8); });
  SetIfZero(spec.head_dim(), [&] { spec.set_head_dim(128); });
  SetIfZero(spec.page_size(), [&] { spec.set_page_size(16); });
  SetIfZero(spec.dtype(), [&] { spec.set_dtype(v1::DATA_TYPE_BF16); });
  SetIfZero(spec.backend(), [&] { spec.set_backend(v1::ATTENTION_BACKEND_GPUPROF); });
}

absl::Status ValidateAttentionSpec(const v1::AttentionSpec& spec, int64_t gpu_memory) {
  RETURN_IF_ERROR(CheckRange("attention.batch_size", spec.batch_size(), 1, 4096));
  RETURN_IF_ERROR(CheckRange("attention.kv_len", spec.kv_len(), 1, int64_t{1} << 20));
  if (spec.phase() == v1::ATTENTION_PHASE_DECODE) {
    // One token, or a few draft tokens for speculative decoding.
    RETURN_IF_ERROR(CheckRange("attention.q_len", spec.q_len(), 1, 8));
  } else {
    RETURN_IF_ERROR(CheckRange("attention.q_len", spec.q_len(), 1, spec.kv_len()));
  }
  RETURN_IF_ERROR(CheckRange("attention.num_qo_heads", spec.num_qo_heads(), 1, 256));
  RETURN_IF_ERROR(CheckRange("attention.num_kv_heads", spec.num_kv_heads(), 1, spec.num_qo_heads()));
  if (spec.num_qo_heads() % spec.num_kv_heads() != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "attention.num_kv_heads: got %d; must divide num_qo_heads (%d)", spec.num_kv_heads(),
        spec.num_qo_heads()));
  }
  // The head sizes the kernels are instantiated for (kernels/attention/prefill.h, decode.h).
  if (spec.phase() == v1::ATTENTION_PHASE_DECODE) {
    if (spec.head_dim() != 64 && spec.head_dim() != 128 && spec.head_dim() != 256) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "attention.head_dim: got %d; decode takes 64, 128 or 256", spec.head_dim()));
    }
  } else if (spec.head_dim() != 64 && spec.head_dim() != 128) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "attention.head_dim: got %d; prefill takes 64 or 128", spec.head_dim()));
  }
  RETURN_IF_ERROR(CheckRange("attention.page_size", spec.page_size(), 1, 1024));
  RETURN_IF_ERROR(CheckPowerOfTwo("attention.page_size", spec.page_size()));
  RETURN_IF_ERROR(CheckDataType("attention.dtype", spec.dtype(),
                                {v1::DATA_TYPE_FP16, v1::DATA_TYPE_BF16}));
  return CheckBytesFit("attention (paged K and V caches)",
                       {2, spec.batch_size(), spec.kv_len(), spec.num_kv_heads(), spec.head_dim(),
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

const WorkloadSpec kAttentionSpec = {
    .request_case = v1::ExperimentRequest::kAttention,
    .workload = v1::WORKLOAD_ATTENTION,
    .uses_gpu = true,
    .supports_tensor_parallelism = true,
    .apply_defaults = &ApplyAttentionDefaults,
    .validate = &ValidateAttention,
};

}  // namespace gpuprof::workloads
