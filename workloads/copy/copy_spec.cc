#include "workloads/copy/copy_spec.h"

#include <cstdint>

#include "absl/strings/str_format.h"
#include "common/enum_names.h"
#include "common/status_macros.h"
#include "workloads/spec_checks.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

// nvbandwidth's default buffer is 512 MiB; a quarter of a GiB already puts launch and
// event overheads far below the noise on every link, at half the memory.
constexpr int64_t kDefaultBytes = int64_t{256} << 20;
constexpr int64_t kMaxBytes = int64_t{1} << 36;

bool IsHostCopy(v1::CopyDirection direction) {
  return direction == v1::COPY_DIRECTION_HOST_TO_DEVICE ||
         direction == v1::COPY_DIRECTION_DEVICE_TO_HOST;
}

// The GPUs the request selects (ids, else a count, else one), as the scheduler will lease them.
int SelectedGpuCount(const v1::ExperimentRequest& request) {
  if (request.gpus().gpu_ids_size() > 0) return request.gpus().gpu_ids_size();
  return request.gpus().gpu_count() > 0 ? request.gpus().gpu_count() : 1;
}

void ApplyCopyDefaults(const v1::ListGpusResponse& inventory, v1::ExperimentRequest& request) {
  auto& spec = *request.mutable_copy();
  SetIfZero(spec.direction(), [&] { spec.set_direction(v1::COPY_DIRECTION_DEVICE_TO_DEVICE); });
  SetIfZero(spec.bytes(), [&] { spec.set_bytes(kDefaultBytes); });
  if (IsHostCopy(spec.direction())) {
    SetIfZero(spec.host_memory(), [&] { spec.set_host_memory(v1::HOST_MEMORY_PINNED); });
  }
  // A peer copy needs a pair: lease two GPUs unless the request chose its own.
  if (spec.direction() == v1::COPY_DIRECTION_PEER && request.gpus().gpu_ids_size() == 0 &&
      request.gpus().gpu_count() == 0 && inventory.gpus_size() >= 2) {
    request.mutable_gpus()->set_gpu_count(2);
  }
}

absl::Status ValidateCopy(const v1::ExperimentRequest& request, const HostLimits& limits) {
  const v1::CopySpec& spec = request.copy();
  const std::string direction = EnumShortName(spec.direction());
  if (spec.direction() == v1::COPY_DIRECTION_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        "copy.direction: unspecified; must be one of device-to-device, host-to-device, "
        "device-to-host, peer");
  }
  RETURN_IF_ERROR(CheckRange("copy.bytes", spec.bytes(), 1, kMaxBytes));
  if (!IsHostCopy(spec.direction()) && spec.host_memory() != v1::HOST_MEMORY_UNSPECIFIED) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "copy.host_memory: got %s with direction %s; only host-to-device and device-to-host "
        "copies use host memory",
        EnumShortName(spec.host_memory()), direction));
  }
  const bool pageable = spec.host_memory() == v1::HOST_MEMORY_PAGEABLE;
  if (spec.bidirectional() && spec.direction() == v1::COPY_DIRECTION_DEVICE_TO_DEVICE) {
    return absl::InvalidArgumentError(
        "copy.bidirectional: a copy within one GPU has one direction; bidirectional is for "
        "host-to-device, device-to-host and peer");
  }
  if (spec.bidirectional() && pageable) {
    return absl::InvalidArgumentError(
        "copy.bidirectional: pageable copies are synchronous with the host, so the two "
        "directions cannot run at once; use host_memory pinned");
  }
  // A pageable copy waits for its stream: it can neither sit behind the stream blocker nor be
  // captured in a graph, so it is timed on the host, one copy after another.
  if (pageable && request.measurement().graph_launches_per_sample() > 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "measurement.graph_launches_per_sample: got %d; pageable copies cannot be captured in "
        "a CUDA graph, leave it 0",
        request.measurement().graph_launches_per_sample()));
  }
  const int gpus = SelectedGpuCount(request);
  if (spec.direction() == v1::COPY_DIRECTION_PEER) {
    if (limits.gpu_count == 1) {
      return absl::InvalidArgumentError(
          "copy.direction: got peer; this host has 1 GPU and peer copies need 2");
    }
    if (gpus < 2) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "copy.direction: got peer with %d GPU selected; peer copies need at least 2 "
          "(gpus.gpu_ids 0,1 or gpus.gpu_count 2)",
          gpus));
    }
  }
  // Every GPU holds a source and a destination buffer, except the destination of a host copy
  // that goes one way.
  const int buffers = IsHostCopy(spec.direction()) && !spec.bidirectional() ? 1 : 2;
  return CheckBytesFit("copy (buffers on each GPU)", {buffers, spec.bytes()},
                       limits.smallest_gpu_memory_bytes, "the GPU's memory");
}

}  // namespace

const WorkloadSpec kCopySpec = {
    .request_case = v1::ExperimentRequest::kCopy,
    .workload = v1::WORKLOAD_COPY,
    .uses_gpu = true,
    .supports_tensor_parallelism = false,
    .apply_defaults = &ApplyCopyDefaults,
    .validate = &ValidateCopy,
    .headline = &LinkBandwidthHeadline,
};

}  // namespace gpuprof::workloads
