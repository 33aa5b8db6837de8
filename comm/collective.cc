#include "comm/collective.h"

#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cuda_status.h"
#include "common/nccl_status.h"
#include "common/status_macros.h"

namespace gpuprof::comm {
namespace {

// ncclGroupStart/End around the sends and receives of all_to_all, so that they progress
// together; FinishCall handles ncclInProgress from the non-blocking communicator.
absl::Status EnqueueAllToAll(NcclCommunicator& comm, const CollectivePointers& pointers,
                             size_t chunk_elements, CollectiveDtype dtype, ncclDataType_t type,
                             cudaStream_t stream) {
  const size_t chunk_bytes = chunk_elements * DtypeSizeBytes(dtype);
  const char* send = static_cast<const char*>(pointers.send);
  char* recv = static_cast<char*>(pointers.recv);
  NCCL_RETURN_IF_ERROR(ncclGroupStart());
  ncclResult_t first_error = ncclSuccess;
  for (int peer = 0; peer < comm.nranks() && first_error == ncclSuccess; ++peer) {
    first_error =
        ncclSend(send + peer * chunk_bytes, chunk_elements, type, peer, comm.get(), stream);
    if (first_error == ncclSuccess) {
      first_error =
          ncclRecv(recv + peer * chunk_bytes, chunk_elements, type, peer, comm.get(), stream);
    }
  }
  // The group must be closed even after an error, or this thread's next NCCL call joins it.
  const ncclResult_t group_end = ncclGroupEnd();
  if (first_error != ncclSuccess)
    return comm.FinishCall(first_error, "all_to_all ncclSend/ncclRecv");
  return comm.FinishCall(group_end, "all_to_all ncclGroupEnd");
}

// Aborts (so kernels waiting on a peer exit) and returns `message` with the abort's outcome.
absl::Status AbortBecause(NcclCommunicator& comm, absl::StatusCode code, std::string message) {
  const absl::Status aborted = comm.Abort();
  absl::StrAppend(&message, "; communicator aborted");
  if (!aborted.ok()) absl::StrAppend(&message, " (", aborted.message(), ")");
  return absl::Status(code, message);
}

}  // namespace

absl::StatusOr<ncclDataType_t> NcclDataTypeFor(CollectiveDtype dtype) {
  RETURN_IF_ERROR(CheckDtypeCompiledIn(dtype));
  switch (dtype) {
    case CollectiveDtype::kFloat32:
      return ncclFloat32;
    case CollectiveDtype::kFloat16:
      return ncclFloat16;
    case CollectiveDtype::kBfloat16:
      return ncclBfloat16;
    case CollectiveDtype::kInt8:
      return ncclInt8;
    case CollectiveDtype::kInt32:
      return ncclInt32;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
    case CollectiveDtype::kFloat8E4M3:
      return ncclFloat8e4m3;
    case CollectiveDtype::kFloat8E5M2:
      return ncclFloat8e5m2;
#endif
    default:
      break;
  }
  return absl::UnimplementedError(absl::StrCat(
      "dtype: ", CollectiveDtypeName(dtype), " is not available in NCCL ", CompiledNcclVersion()));
}

absl::Status EnqueueCollective(NcclCommunicator& comm, const CollectiveRequest& request,
                               const CollectivePointers& pointers, cudaStream_t stream) {
  if (!comm.usable()) {
    return absl::FailedPreconditionError(
        absl::StrCat(comm.Describe(), ": communicator is closed or aborted"));
  }
  ASSIGN_OR_RETURN(const CollectiveLayout layout, LayoutFor(request, comm.nranks(), comm.rank()));
  ASSIGN_OR_RETURN(const ncclDataType_t type, NcclDataTypeFor(request.dtype));
  ncclComm_t handle = comm.get();
  switch (request.op) {
    case CollectiveOp::kAllReduce:
      return comm.FinishCall(ncclAllReduce(pointers.send, pointers.recv, layout.nccl_count, type,
                                           ncclSum, handle, stream),
                             "ncclAllReduce");
    case CollectiveOp::kAllGather:
      return comm.FinishCall(
          ncclAllGather(pointers.send, pointers.recv, layout.nccl_count, type, handle, stream),
          "ncclAllGather");
    case CollectiveOp::kReduceScatter:
      return comm.FinishCall(ncclReduceScatter(pointers.send, pointers.recv, layout.nccl_count,
                                               type, ncclSum, handle, stream),
                             "ncclReduceScatter");
    case CollectiveOp::kBroadcast:
      return comm.FinishCall(ncclBroadcast(pointers.send, pointers.recv, layout.nccl_count, type,
                                           request.root, handle, stream),
                             "ncclBroadcast");
    case CollectiveOp::kAllToAll:
      return EnqueueAllToAll(comm, pointers, layout.chunk_elements, request.dtype, type, stream);
  }
  return absl::InvalidArgumentError("op: unknown collective");
}

absl::Status EnqueueCollective(NcclCommunicator& comm, const CollectiveRequest& request,
                               const CollectiveBuffers& buffers, cudaStream_t stream) {
  ASSIGN_OR_RETURN(const CollectiveLayout layout, LayoutFor(request, comm.nranks(), comm.rank()));
  ASSIGN_OR_RETURN(const CollectivePointers pointers, buffers.PointersFor(layout, request));
  return EnqueueCollective(comm, request, pointers, stream);
}

absl::Status WaitWithDeadline(NcclCommunicator& comm, cudaStream_t stream, absl::Time deadline) {
  if (!comm.usable()) {
    return absl::FailedPreconditionError(
        absl::StrCat(comm.Describe(), ": communicator is closed or aborted"));
  }
  const absl::Time start = absl::Now();
  int polls = 0;
  while (true) {
    const cudaError_t query = cudaStreamQuery(stream);
    if (query != cudaSuccess && query != cudaErrorNotReady) {
      return AbortBecause(comm, absl::StatusCode::kInternal,
                          absl::StrCat(comm.Describe(), ": collective failed: ",
                                       CudaStatus(query, "cudaStreamQuery").message()));
    }
    // Checked also once the stream is done: NCCL may have failed without the stream seeing it.
    if (absl::Status async = comm.AsyncError(); !async.ok()) {
      return AbortBecause(comm, absl::StatusCode::kInternal, std::string(async.message()));
    }
    if (query == cudaSuccess) return absl::OkStatus();
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return AbortBecause(
          comm, absl::StatusCode::kDeadlineExceeded,
          absl::StrCat(comm.Describe(), ": collective did not complete within ",
                       absl::FormatDuration(now - start), " (a peer may have stopped)"));
    }
    // Spin briefly for small messages, then back off so a long wait does not hold a core.
    if (++polls < 1024) {
      std::this_thread::yield();
    } else {
      absl::SleepFor(absl::Microseconds(polls < 8192 ? 20 : 500));
    }
  }
}

}  // namespace gpuprof::comm
