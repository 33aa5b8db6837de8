#include "workloads/collective/collective_spec.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_format.h"
#include "common/data_types.h"
#include "common/status_macros.h"
#include "workloads/spec_checks.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

void ApplyCollectiveDefaults(const v1::ListGpusResponse& inventory, v1::ExperimentRequest& request) {
  auto& spec = *request.mutable_collective();
  SetIfZero(spec.op(), [&] { spec.set_op(v1::COLLECTIVE_OP_ALL_REDUCE); });
  SetIfZero(spec.bytes_per_rank(), [&] { spec.set_bytes_per_rank(int64_t{64} << 20); });
  SetIfZero(spec.dtype(), [&] { spec.set_dtype(v1::DATA_TYPE_BF16); });
  SetIfZero(spec.buffer_mode(), [&] { spec.set_buffer_mode(v1::BUFFER_MODE_DEVICE); });
  // A collective spans every GPU it leases.
  if (request.tp_degree() == 0 && request.gpus().gpu_ids_size() > 0) {
    request.set_tp_degree(request.gpus().gpu_ids_size());
  } else if (request.tp_degree() == 0 && request.gpus().gpu_count() > 0) {
    request.set_tp_degree(request.gpus().gpu_count());
  } else if (request.tp_degree() == 0) {
    request.set_tp_degree(std::max(1, std::min(2, inventory.gpus_size())));
  }
}

absl::Status ValidateCollectiveSpec(const v1::CollectiveSpec& spec, int64_t gpu_memory) {
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
  const int64_t element = DataTypeBytes(spec.dtype());
  if (spec.bytes_per_rank() % element != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "collective.bytes_per_rank: got %d; must be a multiple of the element size (%d bytes)",
        spec.bytes_per_rank(), element));
  }
  return CheckBytesFit("collective (send and receive buffers)", {2, spec.bytes_per_rank()},
                       gpu_memory, "the GPU's memory");
}

absl::Status ValidateCollective(const v1::ExperimentRequest& request, const HostLimits& limits) {
  return ValidateCollectiveSpec(request.collective(), limits.smallest_gpu_memory_bytes);
}

}  // namespace

const WorkloadSpec kCollectiveSpec = {
    .request_case = v1::ExperimentRequest::kCollective,
    .workload = v1::WORKLOAD_COLLECTIVE,
    .uses_gpu = true,
    .apply_defaults = &ApplyCollectiveDefaults,
    .validate = &ValidateCollective,
};

}  // namespace gpuprof::workloads
