#include "workloads/index/index_spec.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/data_types.h"
#include "common/status_macros.h"
#include "google/protobuf/util/time_util.h"
#include "workloads/spec_checks.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

// Limits of the index/store kernels (kernels/copy/copy_kernel_config.h): threads per block when
// unset, warps that may share a row, and threads an SM holds.
constexpr int kDefaultKernelThreads = 128;
constexpr int kMaxIndexSplits = 128;
constexpr int kMaxThreadsPerSm = 2048;
const std::vector<v1::DataType> kFloatTypes = {v1::DATA_TYPE_FP32, v1::DATA_TYPE_FP16,
                                               v1::DATA_TYPE_BF16};

void ApplyIndexDefaults(const v1::ListGpusResponse& inventory, v1::ExperimentRequest& request) {
  auto& spec = *request.mutable_index();
  SetIfZero(spec.num_tokens(), [&] { spec.set_num_tokens(4096); });
  SetIfZero(spec.vocab_size(), [&] { spec.set_vocab_size(128256); });
  SetIfZero(spec.hidden_dim(), [&] { spec.set_hidden_dim(4096); });
  SetIfZero(spec.dtype(), [&] { spec.set_dtype(v1::DATA_TYPE_BF16); });
  if (request.tp_degree() > 1) {
    // Every rank must run the same number of all-reduces: a fixed sample count, no stop on
    // noise or time that each rank would judge on its own.
    auto& measurement = *request.mutable_measurement();
    SetIfZero(measurement.min_iterations(), [&] { measurement.set_min_iterations(50); });
    measurement.set_max_iterations(measurement.min_iterations());
    *measurement.mutable_time_budget() = google::protobuf::util::TimeUtil::SecondsToDuration(600);
  }
}

absl::Status ValidateIndexSpec(const v1::IndexSpec& spec, int64_t gpu_memory) {
  RETURN_IF_ERROR(CheckRange("index.num_tokens", spec.num_tokens(), 1, kMaxTokens));
  RETURN_IF_ERROR(CheckRange("index.vocab_size", spec.vocab_size(), 1, int64_t{1} << 24));
  RETURN_IF_ERROR(CheckRange("index.hidden_dim", spec.hidden_dim(), 1, 65536));
  RETURN_IF_ERROR(CheckDataType("index.dtype", spec.dtype(), kFloatTypes));
  RETURN_IF_ERROR(CheckRange("index.num_splits", spec.num_splits(), 0, kMaxIndexSplits));
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
  const int64_t element = DataTypeBytes(spec.dtype());
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

absl::Status ValidateIndex(const v1::ExperimentRequest& request, const HostLimits& limits) {
  if (request.tp_degree() > 1 && request.index().has_vocab_range()) {
    return absl::InvalidArgumentError(
        "index.vocab_range: set by the ranks when tp_degree > 1 (each rank takes its shard); "
        "leave it unset");
  }
  return ValidateIndexSpec(request.index(), limits.smallest_gpu_memory_bytes);
}

}  // namespace

const WorkloadSpec kIndexSpec = {
    .request_case = v1::ExperimentRequest::kIndex,
    .workload = v1::WORKLOAD_INDEX,
    .uses_gpu = true,
    .supports_tensor_parallelism = true,
    .apply_defaults = &ApplyIndexDefaults,
    .validate = &ValidateIndex,
    .headline = &BandwidthHeadline,
};

}  // namespace gpuprof::workloads
