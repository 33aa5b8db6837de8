#include "workloads/collective/collective_spec.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>
#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/data_types.h"
#include "common/enum_names.h"
#include "common/status_macros.h"
#include "google/protobuf/util/time_util.h"
#include "workloads/spec_checks.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

// The most sizes one sweep may have (nccl-tests' -b 8 -e 64G -f 1.01 would be a mistake).
constexpr int64_t kMaxSweepSizes = 4096;
constexpr int64_t kMaxCollectiveBytes = int64_t{1} << 36;

void ApplyCollectiveDefaults(const v1::ListGpusResponse& inventory, v1::ExperimentRequest& request) {
  auto& spec = *request.mutable_collective();
  SetIfZero(spec.op(), [&] { spec.set_op(v1::COLLECTIVE_OP_ALL_REDUCE); });
  SetIfZero(spec.dtype(), [&] { spec.set_dtype(v1::DATA_TYPE_BF16); });
  SetIfZero(spec.buffer_mode(), [&] { spec.set_buffer_mode(v1::BUFFER_MODE_DEVICE); });
  // One size unless a sweep is asked for; a sweep's missing end is its other end.
  if (spec.min_bytes() == 0 && spec.max_bytes() == 0) {
    SetIfZero(spec.bytes_per_rank(), [&] { spec.set_bytes_per_rank(int64_t{64} << 20); });
    spec.set_min_bytes(spec.bytes_per_rank());
    spec.set_max_bytes(spec.bytes_per_rank());
  }
  SetIfZero(spec.min_bytes(), [&] { spec.set_min_bytes(spec.max_bytes()); });
  SetIfZero(spec.max_bytes(), [&] { spec.set_max_bytes(spec.min_bytes()); });
  SetIfZero(spec.step_factor(), [&] { spec.set_step_factor(2.0); });
  // A collective spans every GPU it leases.
  if (request.tp_degree() == 0 && request.gpus().gpu_ids_size() > 0) {
    request.set_tp_degree(request.gpus().gpu_ids_size());
  } else if (request.tp_degree() == 0 && request.gpus().gpu_count() > 0) {
    request.set_tp_degree(request.gpus().gpu_count());
  } else if (request.tp_degree() == 0) {
    request.set_tp_degree(std::max(1, std::min(2, inventory.gpus_size())));
  }
  // Every rank must run the same number of collectives, so samples stop at a fixed count:
  // the noise target and time budget, which each rank would judge on its own, do not apply.
  auto& measurement = *request.mutable_measurement();
  SetIfZero(measurement.min_iterations(), [&] { measurement.set_min_iterations(20); });
  measurement.set_max_iterations(measurement.min_iterations());
  *measurement.mutable_time_budget() = google::protobuf::util::TimeUtil::SecondsToDuration(600);
  if (!measurement.has_warmup_iterations()) measurement.set_warmup_iterations(5);
  if (spec.eager()) {
    // A batch of host launches per sample, as NCCL driven directly runs them back to back.
    measurement.set_graph_launches_per_sample(0);
    SetIfZero(measurement.eager_launches_per_sample(),
              [&] { measurement.set_eager_launches_per_sample(20); });
  } else {
    SetIfZero(measurement.graph_launches_per_sample(),
              [&] { measurement.set_graph_launches_per_sample(20); });
  }
}

absl::Status ValidateCollectiveSpec(const v1::CollectiveSpec& spec, int tp_degree,
                                    int64_t gpu_memory) {
  if (spec.op() == v1::COLLECTIVE_OP_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        "collective.op: unspecified; must be one of all-reduce, all-gather, reduce-scatter, "
        "broadcast, all-to-all");
  }
  RETURN_IF_ERROR(CheckDataType("collective.dtype", spec.dtype(),
                                {v1::DATA_TYPE_FP32, v1::DATA_TYPE_FP16, v1::DATA_TYPE_BF16,
                                 v1::DATA_TYPE_INT8, v1::DATA_TYPE_INT32, v1::DATA_TYPE_FP8_E4M3,
                                 v1::DATA_TYPE_FP8_E5M2}));
  RETURN_IF_ERROR(CheckRange("collective.min_bytes", spec.min_bytes(), 1, kMaxCollectiveBytes));
  RETURN_IF_ERROR(CheckRange("collective.max_bytes", spec.max_bytes(), spec.min_bytes(),
                             kMaxCollectiveBytes));
  if (spec.min_bytes() < spec.max_bytes()) {
    if (!(spec.step_factor() > 1.0) || !std::isfinite(spec.step_factor())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "collective.step_factor: got %g; must be greater than 1", spec.step_factor()));
    }
    const double sizes =
        std::floor(std::log(static_cast<double>(spec.max_bytes()) / spec.min_bytes()) /
                   std::log(spec.step_factor())) + 1;
    if (sizes > kMaxSweepSizes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "collective.step_factor: got %g, which makes %.0f sizes from %d to %d bytes; at most "
          "%d allowed",
          spec.step_factor(), sizes, spec.min_bytes(), spec.max_bytes(), kMaxSweepSizes));
    }
  }
  if (spec.in_place() && spec.op() == v1::COLLECTIVE_OP_ALL_TO_ALL) {
    return absl::InvalidArgumentError(
        "collective.in_place: all-to-all runs out of place only (its chunks would be "
        "overwritten before they are sent)");
  }
  if (spec.op() == v1::COLLECTIVE_OP_BROADCAST) {
    RETURN_IF_ERROR(CheckRange("collective.root", spec.root(), 0, std::max(0, tp_degree - 1)));
  } else if (spec.root() != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("collective.root: got %d; only broadcast has a root", spec.root()));
  }
  // The wrapper keeps the tensors' own send and receive buffers beside the window's two.
  const bool wrapper = spec.buffer_mode() == v1::BUFFER_MODE_WRAPPER;
  return CheckBytesFit(wrapper ? "collective (tensors' and window's send and receive buffers)"
                               : "collective (send and receive buffers)",
                       {wrapper ? 4 : 2, spec.max_bytes()}, gpu_memory, "the GPU's memory");
}

// "2.28.3" -> 22803, as NCCL_VERSION_CODE counts; 0 when it does not parse.
int NcclVersionCode(const std::string& version) {
  const std::vector<std::string> parts = absl::StrSplit(version, '.');
  int major = 0, minor = 0, patch = 0;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &major) ||
      !absl::SimpleAtoi(parts[1], &minor) || !absl::SimpleAtoi(parts[2], &patch)) {
    return 0;
  }
  return major * 10000 + minor * 100 + patch;
}

bool SplitsAcrossRanks(v1::CollectiveOp op) {
  return op == v1::COLLECTIVE_OP_ALL_GATHER || op == v1::COLLECTIVE_OP_REDUCE_SCATTER ||
         op == v1::COLLECTIVE_OP_ALL_TO_ALL;
}

absl::Status ValidateCollective(const v1::ExperimentRequest& request, const HostLimits& limits) {
  const v1::CollectiveSpec& spec = request.collective();
  // fp8 reductions and transfers came with NCCL 2.24.
  constexpr int kFirstNcclWithFp8 = 22400;
  const int nccl = NcclVersionCode(limits.nccl_version);
  if ((spec.dtype() == v1::DATA_TYPE_FP8_E4M3 || spec.dtype() == v1::DATA_TYPE_FP8_E5M2) &&
      nccl > 0 && nccl < kFirstNcclWithFp8) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "collective.dtype: got %s; this host's NCCL %s has no fp8 (NCCL 2.24 or later does)",
        DataTypeName(spec.dtype()), limits.nccl_version));
  }
  // Symmetric windows: NCCL's symmetric kernels need every rank's buffer at the same offset,
  // which in-place all-gather and reduce-scatter break, and NCCL 2.28.3 returned wrong
  // all-gather / reduce-scatter data for per-rank chunks that were not a multiple of 16 bytes
  // (docs/gpu-runs/comm-nccl.md): refuse both before any rank starts.
  const bool chunks_per_rank = spec.op() == v1::COLLECTIVE_OP_ALL_GATHER ||
                               spec.op() == v1::COLLECTIVE_OP_REDUCE_SCATTER;
  // The wrapper's staged path runs on a symmetric window too.
  const bool window = spec.buffer_mode() == v1::BUFFER_MODE_SYMMETRIC ||
                      spec.buffer_mode() == v1::BUFFER_MODE_WRAPPER;
  if (window && chunks_per_rank) {
    if (spec.in_place()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "collective.in_place: %s over symmetric windows runs out of place only (every rank's "
          "buffer must sit at the same offset)",
          EnumShortName(spec.op())));
    }
    const int64_t tp = std::max(1, request.tp_degree());
    const bool integral_factor =
        spec.min_bytes() == spec.max_bytes() || spec.step_factor() == std::floor(spec.step_factor());
    if (spec.min_bytes() % (16 * tp) != 0 || !integral_factor) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "collective.min_bytes: got %d (step factor %g); %s over symmetric windows needs "
          "per-rank chunks that are multiples of 16 bytes: min_bytes a multiple of %d and a "
          "whole step factor",
          spec.min_bytes(), spec.step_factor(), EnumShortName(spec.op()), 16 * tp));
    }
  }
  // One size that the op splits into a chunk per rank must split evenly; a sweep's sizes are
  // rounded to that, as nccl-tests rounds them.
  const int64_t ranks = std::max(1, request.tp_degree());
  const int64_t element = DataTypeBytes(spec.dtype());
  if (SplitsAcrossRanks(spec.op()) && spec.min_bytes() == spec.max_bytes() && element > 0 &&
      spec.min_bytes() % (element * ranks) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "collective.bytes_per_rank: got %d; %s splits its buffer into one chunk per rank, so "
        "it must be a multiple of %d ranks x %d-byte elements",
        spec.min_bytes(), EnumShortName(spec.op()), ranks, element));
  }
  // Every GPU of the lease is a rank.
  const auto& gpus = request.gpus();
  const int gpu_set = gpus.gpu_ids_size() > 0 ? gpus.gpu_ids_size()
                      : gpus.gpu_count() > 0  ? gpus.gpu_count()
                                              : request.tp_degree();
  if (request.tp_degree() != gpu_set) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tp_degree: got %d with %d GPUs selected; collective runs one rank per GPU, so they "
        "must be equal",
        request.tp_degree(), gpu_set));
  }
  return ValidateCollectiveSpec(request.collective(), request.tp_degree(),
                                limits.smallest_gpu_memory_bytes);
}

}  // namespace

const WorkloadSpec kCollectiveSpec = {
    .request_case = v1::ExperimentRequest::kCollective,
    .workload = v1::WORKLOAD_COLLECTIVE,
    .uses_gpu = true,
    .supports_tensor_parallelism = true,
    .apply_defaults = &ApplyCollectiveDefaults,
    .validate = &ValidateCollective,
    .headline = &BusBandwidthHeadline,
};

}  // namespace gpuprof::workloads
