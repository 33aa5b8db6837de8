#include "daemon/request_validation.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "daemon/gpu_placement.h"
#include "daemon/radix_spec.h"
#include "google/protobuf/util/time_util.h"

namespace gpuprof::daemon {
namespace {

using ::google::protobuf::util::TimeUtil;

constexpr int64_t kMaxTokens = int64_t{1} << 24;
constexpr int64_t kMaxLabels = 32;
constexpr size_t kMaxLabelKeyBytes = 63;
constexpr size_t kMaxLabelValueBytes = 256;
constexpr size_t kMaxDescriptionBytes = 4096;
constexpr size_t kMaxUserBytes = 64;
constexpr int kMaxPriority = 100;
// Limits of the index/store kernels (kernels/copy_kernel_config.h): threads per block when
// unset, threads an SM holds, and the largest row a kernel is specialised for.
constexpr int kDefaultKernelThreads = 128;
constexpr int kMaxThreadsPerSm = 2048;
constexpr int64_t kMaxKernelRowBytes = int64_t{1} << 18;

absl::Status OutOfRange(absl::string_view field, int64_t value, int64_t low, int64_t high) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: got %d; must be in [%d, %d]", field, value, low, high));
}

absl::Status CheckRange(absl::string_view field, int64_t value, int64_t low, int64_t high) {
  if (value < low || value > high) return OutOfRange(field, value, low, high);
  return absl::OkStatus();
}

absl::Status CheckPowerOfTwo(absl::string_view field, int64_t value) {
  if (value > 0 && (value & (value - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: got %d; must be a power of two", field, value));
  }
  return absl::OkStatus();
}

int64_t ElementBytes(v1::DataType dtype) {
  switch (dtype) {
    case v1::DATA_TYPE_FP32:
    case v1::DATA_TYPE_INT32:
      return 4;
    case v1::DATA_TYPE_FP16:
    case v1::DATA_TYPE_BF16:
      return 2;
    case v1::DATA_TYPE_FP8_E4M3:
    case v1::DATA_TYPE_INT8:
      return 1;
    default:
      return 0;
  }
}

std::string DataTypeName(v1::DataType dtype) {
  std::string name = v1::DataType_Name(dtype);
  return absl::AsciiStrToLower(name.substr(std::string("DATA_TYPE_").size()));
}

absl::Status CheckDataType(absl::string_view field, v1::DataType dtype,
                           const std::vector<v1::DataType>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), dtype) != allowed.end()) {
    return absl::OkStatus();
  }
  std::vector<std::string> names;
  for (v1::DataType type : allowed) names.push_back(DataTypeName(type));
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: got %s; must be one of %s", field,
      dtype == v1::DATA_TYPE_UNSPECIFIED ? std::string("unspecified") : DataTypeName(dtype),
      absl::StrJoin(names, ", ")));
}

// a * b * ... without signed overflow; nullopt when the product does not fit in int64.
std::optional<int64_t> CheckedProduct(std::initializer_list<int64_t> factors) {
  int64_t product = 1;
  for (int64_t factor : factors) {
    if (__builtin_mul_overflow(product, factor, &product)) return std::nullopt;
  }
  return product;
}

absl::Status CheckBytesFit(absl::string_view what, std::initializer_list<int64_t> factors,
                           int64_t limit_bytes, absl::string_view limit_name) {
  const auto bytes = CheckedProduct(factors);
  if (!bytes.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the sizes overflow a 64-bit byte count"));
  }
  if (limit_bytes > 0 && *bytes > limit_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: needs %.2f GiB, more than %s (%.2f GiB)", what, *bytes / 1073741824.0, limit_name,
        limit_bytes / 1073741824.0));
  }
  return absl::OkStatus();
}

const std::vector<v1::DataType> kFloatTypes = {v1::DATA_TYPE_FP32, v1::DATA_TYPE_FP16,
                                               v1::DATA_TYPE_BF16};

// Memory of the smallest GPU: a first, host-wide bound; the worker checks free memory too.
int64_t SmallestGpuMemory(const v1::ListGpusResponse& inventory) {
  int64_t smallest = 0;
  for (const auto& gpu : inventory.gpus()) {
    if (smallest == 0 || gpu.total_memory_bytes() < smallest) smallest = gpu.total_memory_bytes();
  }
  return smallest;
}

absl::Status ValidateIndex(const v1::IndexSpec& spec, int64_t gpu_memory) {
  RETURN_IF_ERROR(CheckRange("index.num_tokens", spec.num_tokens(), 1, kMaxTokens));
  RETURN_IF_ERROR(CheckRange("index.vocab_size", spec.vocab_size(), 1, int64_t{1} << 24));
  RETURN_IF_ERROR(CheckRange("index.hidden_dim", spec.hidden_dim(), 1, 65536));
  RETURN_IF_ERROR(CheckDataType("index.dtype", spec.dtype(), kFloatTypes));
  RETURN_IF_ERROR(CheckRange("index.num_splits", spec.num_splits(), 0, 32));
  RETURN_IF_ERROR(CheckPowerOfTwo("index.num_splits", spec.num_splits()));
  RETURN_IF_ERROR(CheckRange("index.threads", spec.threads(), 0, 1024));
  if (spec.threads() % 32 != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "index.threads: got %d; must be a multiple of 32 (a whole number of warps)",
        spec.threads()));
  }
  RETURN_IF_ERROR(CheckRange("index.max_occupancy", spec.max_occupancy(), 0, 32));
  if (spec.has_vocab_range()) {
    const auto& range = spec.vocab_range();
    if (range.start() < 0 || range.start() >= range.end() || range.end() > spec.vocab_size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "index.vocab_range: got [%d, %d); must satisfy 0 <= start < end <= vocab_size (%d)",
          range.start(), range.end(), spec.vocab_size()));
    }
  }
  const int64_t element = ElementBytes(spec.dtype());
  RETURN_IF_ERROR(CheckBytesFit("index (embedding table)",
                                {spec.vocab_size(), spec.hidden_dim(), element}, gpu_memory,
                                "the GPU's memory"));
  RETURN_IF_ERROR(CheckBytesFit("index (gathered rows)",
                                {spec.num_tokens(), spec.hidden_dim(), element}, gpu_memory,
                                "the GPU's memory"));
  // The kernel gives each of num_splits warps an equal slice of a row.
  const int64_t row_bytes = spec.hidden_dim() * element;
  if (spec.num_splits() > 0 && row_bytes % spec.num_splits() != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "index.num_splits: got %d; must divide the row of %d bytes (hidden_dim %d x %d-byte "
        "%s)",
        spec.num_splits(), row_bytes, spec.hidden_dim(), element, DataTypeName(spec.dtype())));
  }
  // __launch_bounds__(threads, max_occupancy) must fit an SM's 2048 threads.
  const int threads = spec.threads() == 0 ? kDefaultKernelThreads : spec.threads();
  if (spec.max_occupancy() * threads > kMaxThreadsPerSm) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "index.max_occupancy: got %d; must be at most %d for %d threads per block (%d threads "
        "per SM)",
        spec.max_occupancy(), kMaxThreadsPerSm / threads, threads, kMaxThreadsPerSm));
  }
  return absl::OkStatus();
}

absl::Status ValidateStore(const v1::StoreSpec& spec, int64_t gpu_memory) {
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
      {2, spec.cache_slots(), spec.num_kv_heads(), spec.head_dim(), ElementBytes(spec.dtype())},
      gpu_memory, "the GPU's memory"));
  const int64_t row_bytes = spec.num_kv_heads() * spec.head_dim() * ElementBytes(spec.dtype());
  if (row_bytes > kMaxKernelRowBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "store.num_kv_heads: got %d; num_kv_heads x head_dim x element bytes is %d bytes per "
        "token and must be at most %d",
        spec.num_kv_heads(), row_bytes, kMaxKernelRowBytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateAttention(const v1::AttentionSpec& spec, int64_t gpu_memory) {
  RETURN_IF_ERROR(CheckRange("attention.batch_size", spec.batch_size(), 1, 4096));
  RETURN_IF_ERROR(CheckRange("attention.kv_len", spec.kv_len(), 1, int64_t{1} << 20));
  if (spec.phase() == v1::ATTENTION_PHASE_DECODE) {
    RETURN_IF_ERROR(CheckRange("attention.q_len", spec.q_len(), 1, 16));
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
  if (spec.head_dim() != 64 && spec.head_dim() != 128 && spec.head_dim() != 256) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "attention.head_dim: got %d; must be one of 64, 128, 256", spec.head_dim()));
  }
  RETURN_IF_ERROR(CheckRange("attention.page_size", spec.page_size(), 1, 1024));
  RETURN_IF_ERROR(CheckDataType("attention.dtype", spec.dtype(),
                                {v1::DATA_TYPE_FP16, v1::DATA_TYPE_BF16}));
  return CheckBytesFit("attention (paged K and V caches)",
                       {2, spec.batch_size(), spec.kv_len(), spec.num_kv_heads(), spec.head_dim(),
                        ElementBytes(spec.dtype())},
                       gpu_memory, "the GPU's memory");
}

absl::Status ValidateCollective(const v1::CollectiveSpec& spec, int64_t gpu_memory) {
  if (spec.op() == v1::COLLECTIVE_OP_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        "collective.op: unspecified; must be one of all-reduce, all-gather, reduce-scatter, "
        "broadcast, all-to-all");
  }
  RETURN_IF_ERROR(
      CheckRange("collective.bytes_per_rank", spec.bytes_per_rank(), 1, int64_t{1} << 36));
  RETURN_IF_ERROR(CheckDataType("collective.dtype", spec.dtype(),
                                {v1::DATA_TYPE_FP32, v1::DATA_TYPE_FP16, v1::DATA_TYPE_BF16,
                                 v1::DATA_TYPE_INT8, v1::DATA_TYPE_INT32}));
  const int64_t element = ElementBytes(spec.dtype());
  if (spec.bytes_per_rank() % element != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "collective.bytes_per_rank: got %d; must be a multiple of the element size (%d bytes)",
        spec.bytes_per_rank(), element));
  }
  return CheckBytesFit("collective (send and receive buffers)", {2, spec.bytes_per_rank()},
                       gpu_memory, "the GPU's memory");
}

absl::Status ValidateMeasurement(const v1::MeasurementOptions& options) {
  RETURN_IF_ERROR(CheckRange("measurement.warmup_iterations", options.warmup_iterations(), 0,
                             100'000));
  RETURN_IF_ERROR(
      CheckRange("measurement.min_iterations", options.min_iterations(), 1, 1'000'000));
  RETURN_IF_ERROR(CheckRange("measurement.max_iterations", options.max_iterations(),
                             options.min_iterations(), 1'000'000));
  const int64_t budget_ms = TimeUtil::DurationToMilliseconds(options.time_budget());
  RETURN_IF_ERROR(CheckRange("measurement.time_budget (ms)", budget_ms, 1, 600'000));
  if (!(options.noise_target() >= 0.0 && options.noise_target() < 1.0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "measurement.noise_target: got %g; must be in [0, 1)", options.noise_target()));
  }
  return CheckRange("measurement.graph_launches_per_sample", options.graph_launches_per_sample(),
                    0, 10'000);
}

bool IsLabelKeyChar(char c) {
  return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-' || c == '/';
}

absl::Status ValidateLabels(const v1::ExperimentRequest& request, const ValidationLimits& limits) {
  if (request.labels_size() > kMaxLabels) {
    return absl::InvalidArgumentError(absl::StrFormat("labels: got %d labels; at most %d allowed",
                                                      request.labels_size(), kMaxLabels));
  }
  for (const auto& [key, value] : request.labels()) {
    if (key.empty() || key.size() > kMaxLabelKeyBytes ||
        !std::all_of(key.begin(), key.end(), IsLabelKeyChar)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "labels: key \"%s\" is not allowed; keys are 1-%d characters of [A-Za-z0-9._/-]",
          absl::CEscape(key.substr(0, 80)), kMaxLabelKeyBytes));
    }
    if (value.size() > kMaxLabelValueBytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "labels[%s]: value of %d bytes; at most %d allowed", key, value.size(),
          kMaxLabelValueBytes));
    }
    if (key == kFaultLabel) {
      if (!limits.allow_test_faults) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "labels[%s]: fault injection is disabled on this daemon (it is for tests: start "
            "gpuprofd with --enable_test_faults)",
            key));
      }
      static const std::set<std::string> kFaults = {"crash", "hang", "exit", "cuda-error"};
      if (!kFaults.contains(value)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "labels[%s]: got \"%s\"; must be one of crash, hang, exit, cuda-error", key, value));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateCommon(const v1::ExperimentRequest& request, const ValidationLimits& limits) {
  const std::string& user = request.user();
  if (user.empty() || user.size() > kMaxUserBytes ||
      !std::all_of(user.begin(), user.end(), [](char c) {
        return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-' || c == '@';
      })) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "user: got \"%s\"; must be 1-%d characters of [A-Za-z0-9._@-]",
        absl::CEscape(user.substr(0, 80)), kMaxUserBytes));
  }
  if (request.description().size() > kMaxDescriptionBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("description: %d bytes; at most %d allowed",
                        request.description().size(), kMaxDescriptionBytes));
  }
  RETURN_IF_ERROR(CheckRange("priority", request.priority(), -kMaxPriority, kMaxPriority));
  const int64_t timeout_s = TimeUtil::DurationToSeconds(request.timeout());
  RETURN_IF_ERROR(CheckRange("timeout (seconds)", timeout_s, 1,
                             absl::ToInt64Seconds(limits.max_timeout)));
  RETURN_IF_ERROR(ValidateLabels(request, limits));
  for (int i = 0; i < request.tracing().extra_metrics_size(); ++i) {
    const std::string& metric = request.tracing().extra_metrics(i);
    if (metric.empty() || metric.size() > 256) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tracing.extra_metrics[%d]: must be a metric name of 1-256 characters", i));
    }
  }
  if (request.tracing().extra_metrics_size() > 64) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tracing.extra_metrics: got %d names; at most 64 allowed",
        request.tracing().extra_metrics_size()));
  }
  // CPU workloads take no measurement options.
  return IsGpuWorkload(request) ? ValidateMeasurement(request.measurement()) : absl::OkStatus();
}

// Checks of the GPU selection that need no inventory: ids, counts and the TP degree agree.
absl::Status ValidateGpuSelectionShape(const v1::ExperimentRequest& request) {
  const auto& selection = request.gpus();
  std::set<int> seen;
  for (int i = 0; i < selection.gpu_ids_size(); ++i) {
    const int id = selection.gpu_ids(i);
    if (id < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("gpus.gpu_ids[%d]: got %d; GPU ids are >= 0", i, id));
    }
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("gpus.gpu_ids[%d]: GPU %d is listed twice", i, id));
    }
  }
  RETURN_IF_ERROR(CheckRange("gpus.gpu_count", selection.gpu_count(), 0, 1024));
  if (selection.gpu_ids_size() > 0 && selection.gpu_count() != 0 &&
      selection.gpu_count() != selection.gpu_ids_size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "gpus.gpu_count: got %d with %d explicit gpu_ids; give ids or a count, not both",
        selection.gpu_count(), selection.gpu_ids_size()));
  }
  if (!IsGpuWorkload(request)) {
    if (selection.gpu_ids_size() > 0 || selection.gpu_count() > 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "gpus: %s runs on the CPU; leave the GPU selection empty", WorkloadName(request)));
    }
    return CheckRange("tp_degree", request.tp_degree(), 0, 1);
  }
  const int gpu_set = RequiredGpuCount(request);
  RETURN_IF_ERROR(CheckRange("tp_degree", request.tp_degree(), 1, 1024));
  if (request.tp_degree() > gpu_set) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tp_degree: got %d; must be at most the number of GPUs selected (%d)",
        request.tp_degree(), gpu_set));
  }
  return absl::OkStatus();
}

absl::Status ValidateGpuSelectionOnHost(const v1::ExperimentRequest& request,
                                        const v1::ListGpusResponse& inventory) {
  const int host_gpus = inventory.gpus_size();
  const auto& selection = request.gpus();
  for (int i = 0; i < selection.gpu_ids_size(); ++i) {
    if (selection.gpu_ids(i) >= host_gpus) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "gpus.gpu_ids[%d]: GPU %d does not exist; this host has GPUs 0-%d", i,
          selection.gpu_ids(i), host_gpus - 1));
    }
  }
  const int needed = RequiredGpuCount(request);
  if (needed > host_gpus) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "gpus.gpu_count: needs %d GPUs; this host has %d", needed, host_gpus));
  }
  // A placement no free-for-all host could satisfy would wait forever: refuse it now.
  std::set<int> all;
  for (int i = 0; i < host_gpus; ++i) all.insert(i);
  if (!ChooseGpus(selection, needed, GpuTopology(inventory), all).has_value()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "gpus.placement: no set of %d GPUs on this host satisfies %s", needed,
        v1::GpuSelection::Placement_Name(selection.placement())));
  }
  return absl::OkStatus();
}

}  // namespace

std::string WorkloadName(const v1::ExperimentRequest& request) {
  switch (request.workload_case()) {
    case v1::ExperimentRequest::kIndex:
      return "index";
    case v1::ExperimentRequest::kStore:
      return "store";
    case v1::ExperimentRequest::kAttention:
      return "attention";
    case v1::ExperimentRequest::kCollective:
      return "collective";
    case v1::ExperimentRequest::kRadix:
      return "radix";
    case v1::ExperimentRequest::WORKLOAD_NOT_SET:
      break;
  }
  return "";
}

v1::Workload WorkloadOf(const v1::ExperimentRequest& request) {
  switch (request.workload_case()) {
    case v1::ExperimentRequest::kIndex:
      return v1::WORKLOAD_INDEX;
    case v1::ExperimentRequest::kStore:
      return v1::WORKLOAD_STORE;
    case v1::ExperimentRequest::kAttention:
      return v1::WORKLOAD_ATTENTION;
    case v1::ExperimentRequest::kCollective:
      return v1::WORKLOAD_COLLECTIVE;
    case v1::ExperimentRequest::kRadix:
      return v1::WORKLOAD_RADIX;
    case v1::ExperimentRequest::WORKLOAD_NOT_SET:
      break;
  }
  return v1::WORKLOAD_UNSPECIFIED;
}

bool IsGpuWorkload(const v1::ExperimentRequest& request) {
  return request.workload_case() != v1::ExperimentRequest::kRadix &&
         request.workload_case() != v1::ExperimentRequest::WORKLOAD_NOT_SET;
}

int RequiredGpuCount(const v1::ExperimentRequest& request) {
  if (!IsGpuWorkload(request)) return 0;
  if (request.gpus().gpu_ids_size() > 0) return request.gpus().gpu_ids_size();
  if (request.gpus().gpu_count() > 0) return request.gpus().gpu_count();
  return std::max(1, request.tp_degree());
}

void ApplyRequestDefaults(const ValidationLimits& limits, const v1::ListGpusResponse& inventory,
                          v1::ExperimentRequest& request) {
  auto set_if_zero = [](auto value, auto setter) {
    if (value == 0) setter();
  };
  switch (request.workload_case()) {
    case v1::ExperimentRequest::kIndex: {
      auto& spec = *request.mutable_index();
      set_if_zero(spec.num_tokens(), [&] { spec.set_num_tokens(4096); });
      set_if_zero(spec.vocab_size(), [&] { spec.set_vocab_size(128256); });
      set_if_zero(spec.hidden_dim(), [&] { spec.set_hidden_dim(4096); });
      set_if_zero(spec.dtype(), [&] { spec.set_dtype(v1::DATA_TYPE_BF16); });
      break;
    }
    case v1::ExperimentRequest::kStore: {
      auto& spec = *request.mutable_store();
      set_if_zero(spec.num_tokens(), [&] { spec.set_num_tokens(4096); });
      set_if_zero(spec.num_kv_heads(), [&] { spec.set_num_kv_heads(8); });
      set_if_zero(spec.head_dim(), [&] { spec.set_head_dim(128); });
      set_if_zero(spec.dtype(), [&] { spec.set_dtype(v1::DATA_TYPE_BF16); });
      set_if_zero(spec.page_size(), [&] { spec.set_page_size(1); });
      set_if_zero(spec.cache_slots(), [&] {
        const int64_t slots = std::max<int64_t>(spec.num_tokens() * 4, 65536);
        spec.set_cache_slots((slots + spec.page_size() - 1) / spec.page_size() * spec.page_size());
      });
      set_if_zero(spec.slot_pattern(), [&] { spec.set_slot_pattern(v1::SLOT_PATTERN_SEQUENTIAL); });
      set_if_zero(spec.launch(), [&] { spec.set_launch(v1::STORE_LAUNCH_FUSED_KV); });
      break;
    }
    case v1::ExperimentRequest::kAttention: {
      auto& spec = *request.mutable_attention();
      set_if_zero(spec.phase(), [&] { spec.set_phase(v1::ATTENTION_PHASE_DECODE); });
      const bool decode = spec.phase() == v1::ATTENTION_PHASE_DECODE;
      set_if_zero(spec.batch_size(), [&] { spec.set_batch_size(decode ? 32 : 1); });
      set_if_zero(spec.kv_len(), [&] { spec.set_kv_len(4096); });
      set_if_zero(spec.q_len(), [&] { spec.set_q_len(decode ? 1 : spec.kv_len()); });
      set_if_zero(spec.num_qo_heads(), [&] { spec.set_num_qo_heads(32); });
      set_if_zero(spec.num_kv_heads(), [&] { spec.set_num_kv_heads(8); });
      set_if_zero(spec.head_dim(), [&] { spec.set_head_dim(128); });
      set_if_zero(spec.page_size(), [&] { spec.set_page_size(16); });
      set_if_zero(spec.dtype(), [&] { spec.set_dtype(v1::DATA_TYPE_BF16); });
      set_if_zero(spec.backend(), [&] { spec.set_backend(v1::ATTENTION_BACKEND_GPUPROF); });
      break;
    }
    case v1::ExperimentRequest::kCollective: {
      auto& spec = *request.mutable_collective();
      set_if_zero(spec.op(), [&] { spec.set_op(v1::COLLECTIVE_OP_ALL_REDUCE); });
      set_if_zero(spec.bytes_per_rank(), [&] { spec.set_bytes_per_rank(int64_t{64} << 20); });
      set_if_zero(spec.dtype(), [&] { spec.set_dtype(v1::DATA_TYPE_BF16); });
      set_if_zero(spec.buffer_mode(), [&] { spec.set_buffer_mode(v1::BUFFER_MODE_DEVICE); });
      // A collective spans every GPU it leases.
      if (request.tp_degree() == 0 && request.gpus().gpu_ids_size() > 0) {
        request.set_tp_degree(request.gpus().gpu_ids_size());
      } else if (request.tp_degree() == 0 && request.gpus().gpu_count() > 0) {
        request.set_tp_degree(request.gpus().gpu_count());
      } else if (request.tp_degree() == 0) {
        request.set_tp_degree(std::max(1, std::min(2, inventory.gpus_size())));
      }
      break;
    }
    case v1::ExperimentRequest::kRadix:
      ApplyRadixDefaults(*request.mutable_radix());
      break;
    case v1::ExperimentRequest::WORKLOAD_NOT_SET:
      break;
  }
  if (IsGpuWorkload(request) && request.tp_degree() == 0) {
    request.set_tp_degree(std::max(1, request.gpus().gpu_ids_size()));
  }
  // Measurement and tracing options mean nothing to CPU workloads; keep their requests clean.
  if (IsGpuWorkload(request)) {
    auto& measurement = *request.mutable_measurement();
    set_if_zero(measurement.warmup_iterations(), [&] { measurement.set_warmup_iterations(10); });
    set_if_zero(measurement.min_iterations(), [&] { measurement.set_min_iterations(10); });
    set_if_zero(measurement.max_iterations(), [&] {
      measurement.set_max_iterations(std::max(1000, measurement.min_iterations()));
    });
    if (!measurement.has_time_budget() ||
        TimeUtil::DurationToNanoseconds(measurement.time_budget()) == 0) {
      *measurement.mutable_time_budget() = TimeUtil::SecondsToDuration(2);
    }
    set_if_zero(measurement.noise_target(), [&] { measurement.set_noise_target(0.01); });
    set_if_zero(measurement.l2_mode(),
                [&] { measurement.set_l2_mode(v1::MeasurementOptions::L2_MODE_HOT); });
    set_if_zero(request.tracing().level(),
                [&] { request.mutable_tracing()->set_level(v1::TracingOptions::LEVEL_ACTIVITY); });
  }
  if (!request.has_timeout() || TimeUtil::DurationToNanoseconds(request.timeout()) == 0) {
    *request.mutable_timeout() =
        TimeUtil::SecondsToDuration(absl::ToInt64Seconds(limits.default_timeout));
  }
}

absl::Status ValidateExperimentRequest(const v1::ExperimentRequest& request,
                                       const v1::ListGpusResponse& inventory,
                                       const ValidationLimits& limits) {
  const int64_t gpu_memory = SmallestGpuMemory(inventory);
  switch (request.workload_case()) {
    case v1::ExperimentRequest::kIndex:
      RETURN_IF_ERROR(ValidateIndex(request.index(), gpu_memory));
      break;
    case v1::ExperimentRequest::kStore:
      RETURN_IF_ERROR(ValidateStore(request.store(), gpu_memory));
      break;
    case v1::ExperimentRequest::kAttention:
      RETURN_IF_ERROR(ValidateAttention(request.attention(), gpu_memory));
      break;
    case v1::ExperimentRequest::kCollective:
      RETURN_IF_ERROR(ValidateCollective(request.collective(), gpu_memory));
      break;
    case v1::ExperimentRequest::kRadix:
      RETURN_IF_ERROR(ValidateRadixSpec(request.radix()));
      break;
    case v1::ExperimentRequest::WORKLOAD_NOT_SET:
      return absl::InvalidArgumentError(
          "workload: not set; must be one of index, store, attention, collective, radix");
  }
  RETURN_IF_ERROR(ValidateCommon(request, limits));
  RETURN_IF_ERROR(ValidateGpuSelectionShape(request));
  const std::string workload = WorkloadName(request);
  if (IsGpuWorkload(request) && inventory.gpus_size() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        workload, " runs on a GPU and this host has none",
        inventory.probe_error().empty() ? "" : absl::StrCat(" (", inventory.probe_error(), ")")));
  }
  const auto& supported = inventory.supported_workloads();
  if (std::find(supported.begin(), supported.end(), workload) == supported.end()) {
    return absl::UnimplementedError(
        absl::StrFormat("workload %s is not available in this build of gpuprof (available: %s)",
                        workload, absl::StrJoin(supported, ", ")));
  }
  if (IsGpuWorkload(request)) RETURN_IF_ERROR(ValidateGpuSelectionOnHost(request, inventory));
  return absl::OkStatus();
}

}  // namespace gpuprof::daemon
