#include "comm/collective_buffers.h"

#include <cuda_runtime_api.h>

#include <array>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cuda_status.h"
#include "common/nccl_status.h"
#include "common/status_macros.h"

namespace gpuprof::comm {
namespace {

constexpr std::array kAllModes = {BufferMode::kDevice, BufferMode::kRegistered,
                                  BufferMode::kSymmetric};

// ncclMemAlloc and ncclCommRegister appeared in 2.19, ncclCommWindowRegister in 2.27.
constexpr int kRegisteredMinVersion = NCCL_VERSION(2, 19, 0);
constexpr int kSymmetricMinVersion = NCCL_VERSION(2, 27, 0);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
#define GPUPROF_NCCL_HAS_WINDOWS 1
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 19, 0)
#define GPUPROF_NCCL_HAS_MEM_ALLOC 1
#endif

// NCCL allocates cuMem granules (2 MiB on current GPUs); registering whole granules keeps
// every rank's window the same size.
constexpr size_t kNcclAllocGranule = size_t{2} << 20;

int MinVersion(BufferMode mode) {
  switch (mode) {
    case BufferMode::kDevice:
      return 0;
    case BufferMode::kRegistered:
      return kRegisteredMinVersion;
    case BufferMode::kSymmetric:
      return kSymmetricMinVersion;
  }
  return 0;
}

// Deregistration may return ncclInProgress on a non-blocking communicator; it is bounded so
// that a destructor cannot hang.
void WaitIdleForTeardown(ncclComm_t comm, absl::string_view step) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (true) {
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &async) != ncclSuccess || async != ncclInProgress) {
      if (async != ncclSuccess && async != ncclInProgress)
        LogIfNcclError(async, std::string_view(step.data(), step.size()));
      return;
    }
    if (absl::Now() >= deadline) {
      LogStatusToStderr(absl::DeadlineExceededError(absl::StrCat(step, " did not finish in 10s")));
      return;
    }
    std::this_thread::yield();
  }
}

// Like NcclCommunicator::FinishCall: the call may go on in the background even after
// ncclSuccess, and the next call on the communicator must wait for it.
void LogTeardownResult(ncclComm_t comm, ncclResult_t result, absl::string_view step) {
  if (result == ncclSuccess || result == ncclInProgress) {
    WaitIdleForTeardown(comm, step);
  } else {
    LogIfNcclError(result, std::string_view(step.data(), step.size()));
  }
}

}  // namespace

std::span<const BufferMode> AllBufferModes() { return kAllModes; }

absl::string_view BufferModeName(BufferMode mode) {
  switch (mode) {
    case BufferMode::kDevice:
      return "device";
    case BufferMode::kRegistered:
      return "registered";
    case BufferMode::kSymmetric:
      return "symmetric";
  }
  return "unknown_mode";
}

absl::StatusOr<BufferMode> ParseBufferMode(absl::string_view name) {
  for (BufferMode mode : kAllModes) {
    if (BufferModeName(mode) == name) return mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("buffer_mode: unknown '", name, "' (one of device, registered, symmetric)"));
}

absl::Status CheckBufferModeSupported(BufferMode mode, int loaded_nccl_version) {
  const int needed = MinVersion(mode);
  if (NCCL_VERSION_CODE < needed) {
    return absl::UnimplementedError(absl::StrCat("buffer_mode: ", BufferModeName(mode),
                                                 " needs NCCL >= ", NcclVersionString(needed),
                                                 "; built against NCCL ", CompiledNcclVersion()));
  }
  if (loaded_nccl_version < needed) {
    return absl::UnimplementedError(absl::StrCat(
        "buffer_mode: ", BufferModeName(mode), " needs NCCL >= ", NcclVersionString(needed),
        "; the loaded library is ", NcclVersionString(loaded_nccl_version)));
  }
  return absl::OkStatus();
}

absl::StatusOr<CollectiveBuffers> CollectiveBuffers::Allocate(NcclCommunicator& comm,
                                                              BufferMode mode,
                                                              size_t bytes_per_buffer) {
  if (!comm.usable()) {
    return absl::FailedPreconditionError(
        absl::StrCat(comm.Describe(), ": buffers need a live communicator"));
  }
  if (bytes_per_buffer == 0) return absl::InvalidArgumentError("bytes_per_buffer: must be > 0");
  ASSIGN_OR_RETURN(const int loaded_version, LoadedNcclVersion());
  RETURN_IF_ERROR(CheckBufferModeSupported(mode, loaded_version));
  CUDA_RETURN_IF_ERROR(cudaSetDevice(comm.device()));

  CollectiveBuffers buffers;
  buffers.comm_ = comm.shared_handle();
  buffers.device_ = comm.device();
  buffers.mode_ = mode;
  if (mode == BufferMode::kDevice) {
    buffers.bytes_per_buffer_ = bytes_per_buffer;
    for (Allocation* allocation : {&buffers.send_, &buffers.recv_}) {
      CUDA_RETURN_IF_ERROR(cudaMalloc(&allocation->data, bytes_per_buffer));
    }
    return buffers;
  }
#ifdef GPUPROF_NCCL_HAS_MEM_ALLOC
  const size_t rounded =
      (bytes_per_buffer + kNcclAllocGranule - 1) / kNcclAllocGranule * kNcclAllocGranule;
  buffers.bytes_per_buffer_ = rounded;
  for (Allocation* allocation : {&buffers.send_, &buffers.recv_}) {
    NCCL_RETURN_IF_ERROR(ncclMemAlloc(&allocation->data, rounded));
    if (mode == BufferMode::kRegistered) {
      RETURN_IF_ERROR(comm.FinishCall(
          ncclCommRegister(comm.get(), allocation->data, rounded, &allocation->registration),
          "ncclCommRegister"));
    } else {
#ifdef GPUPROF_NCCL_HAS_WINDOWS
      RETURN_IF_ERROR(
          comm.FinishCall(ncclCommWindowRegister(comm.get(), allocation->data, rounded,
                                                 &allocation->window, NCCL_WIN_COLL_SYMMETRIC),
                          "ncclCommWindowRegister"));
      // NCCL returns no window, without an error, when this system cannot map peers'
      // buffers symmetrically (no CUDA VMM or P2P between the ranks).
      if (allocation->window == nullptr) {
        return absl::UnimplementedError(absl::StrCat(
            comm.Describe(), ": buffer_mode: NCCL ", NcclVersionString(loaded_version),
            " registered no symmetric window here (needs CUDA VMM and P2P between all ranks)"));
      }
#endif
    }
  }
  return buffers;
#else
  return absl::UnimplementedError("buffer_mode: needs NCCL >= 2.19");
#endif
}

CollectiveBuffers::CollectiveBuffers(CollectiveBuffers&& other) noexcept
    : comm_(std::move(other.comm_)),
      device_(other.device_),
      mode_(other.mode_),
      bytes_per_buffer_(std::exchange(other.bytes_per_buffer_, 0)),
      send_(std::exchange(other.send_, {})),
      recv_(std::exchange(other.recv_, {})) {}

CollectiveBuffers& CollectiveBuffers::operator=(CollectiveBuffers&& other) noexcept {
  if (this != &other) {
    Reset();
    comm_ = std::move(other.comm_);
    device_ = other.device_;
    mode_ = other.mode_;
    bytes_per_buffer_ = std::exchange(other.bytes_per_buffer_, 0);
    send_ = std::exchange(other.send_, {});
    recv_ = std::exchange(other.recv_, {});
  }
  return *this;
}

void CollectiveBuffers::Release(Allocation& allocation) {
  // A communicator that is gone took its registrations with it.
  ncclComm_t comm = comm_ ? comm_->comm() : nullptr;
#ifdef GPUPROF_NCCL_HAS_WINDOWS
  if (allocation.window != nullptr && comm != nullptr) {
    LogTeardownResult(comm, ncclCommWindowDeregister(comm, allocation.window),
                      "ncclCommWindowDeregister");
  }
#endif
#ifdef GPUPROF_NCCL_HAS_MEM_ALLOC
  if (allocation.registration != nullptr && comm != nullptr) {
    LogTeardownResult(comm, ncclCommDeregister(comm, allocation.registration),
                      "ncclCommDeregister");
  }
  if (allocation.data != nullptr && mode_ != BufferMode::kDevice) {
    NCCL_LOG_IF_ERROR(ncclMemFree(allocation.data));
    allocation.data = nullptr;
  }
#endif
  if (allocation.data != nullptr) CUDA_LOG_IF_ERROR(cudaFree(allocation.data));
  allocation = {};
}

void CollectiveBuffers::Reset() {
  if (send_.data == nullptr && recv_.data == nullptr) return;
  if (device_ >= 0) CUDA_LOG_IF_ERROR(cudaSetDevice(device_));
  Release(send_);
  Release(recv_);
  bytes_per_buffer_ = 0;
  comm_.reset();
}

absl::Status CheckSymmetricWindowUse(const CollectiveRequest& request,
                                     const CollectiveLayout& layout) {
  const bool splits_into_chunks =
      request.op == CollectiveOp::kAllGather || request.op == CollectiveOp::kReduceScatter;
  if (!splits_into_chunks) return absl::OkStatus();
  if (request.placement == BufferPlacement::kInPlace) {
    return absl::InvalidArgumentError(absl::StrCat(
        "placement: in-place ", CollectiveOpName(request.op),
        " puts each rank's chunk at a different offset, and symmetric windows need the same "
        "offset on every rank; run it out of place"));
  }
  const size_t chunk_bytes = layout.chunk_elements * DtypeSizeBytes(request.dtype);
  if (chunk_bytes % 16 != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "total_elements: symmetric ", CollectiveOpName(request.op),
        " needs per-rank chunks of a "
        "multiple of 16 bytes (NCCL 2.28.3's symmetric kernels returned wrong data otherwise); "
        "this chunk is ",
        chunk_bytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CollectivePointers> CollectiveBuffers::PointersFor(
    const CollectiveLayout& layout, const CollectiveRequest& request) const {
  const size_t element_bytes = DtypeSizeBytes(request.dtype);
  const size_t needed = layout.BufferElements() * element_bytes;
  if (needed > bytes_per_buffer_) {
    return absl::OutOfRangeError(absl::StrCat(
        "total_elements: ", CollectiveOpName(request.op), " of ", layout.total_elements,
        " elements needs ", needed, " bytes per buffer; buffers hold ", bytes_per_buffer_));
  }
  if (mode_ == BufferMode::kSymmetric) RETURN_IF_ERROR(CheckSymmetricWindowUse(request, layout));
  if (request.placement == BufferPlacement::kOutOfPlace) {
    return CollectivePointers{send_.data, recv_.data};
  }
  char* base = static_cast<char*>(recv_.data);
  return CollectivePointers{base + layout.in_place_send_offset * element_bytes,
                            base + layout.in_place_recv_offset * element_bytes};
}

}  // namespace gpuprof::comm
