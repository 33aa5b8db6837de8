#include "workloads/store/store_spec.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_format.h"
#include "common/data_types.h"
#include "common/status_macros.h"
#include "workloads/spec_checks.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

// The largest row (num_kv_heads x head_dim x element) a store kernel is specialised for.
constexpr int64_t kMaxKernelRowBytes = int64_t{1} << 18;

void ApplyStoreDefaults(const v1::ListGpusResponse& inventory, v1::ExperimentRequest& request) {
  auto& spec = *request.mutable_store();
  SetIfZero(spec.num_tokens(), [&] { spec.set_num_tokens(4096); });
  SetIfZero(spec.num_kv_heads(), [&] { spec.set_num_kv_heads(8); });
  SetIfZero(spec.head_dim(), [&] { spec.set_head_dim(128); });
  SetIfZero(spec.dtype(), [&] { spec.set_dtype(v1::DATA_TYPE_BF16); });
  SetIfZero(spec.page_size(), [&] { spec.set_page_size(1); });
  SetIfZero(spec.cache_slots(), [&] {
    // Out-of-range sizes are left for validation to name; the arithmetic must not overflow.
    if (spec.num_tokens() < 1 || spec.num_tokens() > kMaxTokens || spec.page_size() < 1 ||
        spec.page_size() > 1024) {
      return;
    }
    const int64_t slots = std::max<int64_t>(spec.num_tokens() * 4, 65536);
    spec.set_cache_slots((slots + spec.page_size() - 1) / spec.page_size() * spec.page_size());
  });
  SetIfZero(spec.slot_pattern(), [&] { spec.set_slot_pattern(v1::SLOT_PATTERN_SEQUENTIAL); });
  SetIfZero(spec.launch(), [&] { spec.set_launch(v1::STORE_LAUNCH_FUSED_KV); });
}

absl::Status ValidateStoreSpec(const v1::StoreSpec& spec, int64_t gpu_memory) {
  RETURN_IF_ERROR(CheckRange("store.num_tokens", spec.num_tokens(), 1, kMaxTokens));
  RETURN_IF_ERROR(CheckRange("store.num_kv_heads", spec.num_kv_heads(), 1, 1024));
  RETURN_IF_ERROR(CheckRange("store.head_dim", spec.head_dim(), 1, 1024));
  RETURN_IF_ERROR(CheckDataType("store.dtype", spec.dtype(),
                                {v1::DATA_TYPE_FP32, v1::DATA_TYPE_FP16, v1::DATA_TYPE_BF16,
                                 v1::DATA_TYPE_FP8_E4M3}));
  RETURN_IF_ERROR(CheckRange("store.page_size", spec.page_size(), 1, 1024));
  RETURN_IF_ERROR(
      CheckRange("store.cache_slots", spec.cache_slots(), spec.num_tokens(), int64_t{1} << 31));
  if (spec.cache_slots() % spec.page_size() != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "store.cache_slots: got %d; must be a multiple of page_size (%d)", spec.cache_slots(),
        spec.page_size()));
  }
  // K and V caches plus the K and V inputs.
  RETURN_IF_ERROR(CheckBytesFit(
      "store (K and V caches)",
      {2, spec.cache_slots(), spec.num_kv_heads(), spec.head_dim(), DataTypeBytes(spec.dtype())},
      gpu_memory, "the GPU's memory"));
  const int64_t row_bytes = spec.num_kv_heads() * spec.head_dim() * DataTypeBytes(spec.dtype());
  if (row_bytes > kMaxKernelRowBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "store.num_kv_heads: got %d; num_kv_heads x head_dim x element bytes is %d bytes per "
        "token and must be at most %d",
        spec.num_kv_heads(), row_bytes, kMaxKernelRowBytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateStore(const v1::ExperimentRequest& request, const HostLimits& limits) {
  return ValidateStoreSpec(request.store(), limits.smallest_gpu_memory_bytes);
}

}  // namespace

const WorkloadSpec kStoreSpec = {
    .request_case = v1::ExperimentRequest::kStore,
    .workload = v1::WORKLOAD_STORE,
    .uses_gpu = true,
    .apply_defaults = &ApplyStoreDefaults,
    .validate = &ValidateStore,
    .headline = &BandwidthHeadline,
};

}  // namespace gpuprof::workloads
