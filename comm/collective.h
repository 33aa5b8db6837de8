// Enqueueing one collective on a stream, and waiting for it without hanging.
//
//   ASSIGN_OR_RETURN(auto layout, LayoutFor(request, comm.nranks(), comm.rank()));
//   RETURN_IF_ERROR(EnqueueCollective(comm, request, buffers, stream));
//   RETURN_IF_ERROR(WaitWithDeadline(comm, stream, absl::Now() + absl::Seconds(30)));
//
// all_to_all is a group of ncclSend/ncclRecv pairs, one per peer (chunk p of the send buffer
// to rank p, chunk p of the receive buffer from rank p), as nccl-tests builds it.
#ifndef GPUPROF_COMM_COLLECTIVE_H_
#define GPUPROF_COMM_COLLECTIVE_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/collective_buffers.h"
#include "comm/collective_types.h"
#include "comm/nccl_communicator.h"

namespace gpuprof::comm {

// The NCCL type of `dtype`; UNIMPLEMENTED when this NCCL lacks it.
absl::StatusOr<ncclDataType_t> NcclDataTypeFor(CollectiveDtype dtype);

// Enqueues `request` on `stream` using `pointers`; returns once NCCL has accepted it (the work
// runs asynchronously). Reductions sum. Validates the request first.
absl::Status EnqueueCollective(NcclCommunicator& comm, const CollectiveRequest& request,
                               const CollectivePointers& pointers, cudaStream_t stream);

// The same, with the pointers resolved from `buffers` (OUT_OF_RANGE if they are too small).
absl::Status EnqueueCollective(NcclCommunicator& comm, const CollectiveRequest& request,
                               const CollectiveBuffers& buffers, cudaStream_t stream);

// Waits until everything enqueued on `stream` has finished, polling cudaStreamQuery and
// ncclCommGetAsyncError. On an NCCL error, a CUDA error or `deadline` it aborts the
// communicator (stopping kernels that wait on a dead peer) and returns INTERNAL or
// DEADLINE_EXCEEDED naming the rank and how long it waited. A rank whose peer stopped mid-way
// therefore returns shortly after the deadline instead of hanging.
absl::Status WaitWithDeadline(NcclCommunicator& comm, cudaStream_t stream, absl::Time deadline);

}  // namespace gpuprof::comm

#endif  // GPUPROF_COMM_COLLECTIVE_H_
