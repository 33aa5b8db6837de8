// What a rank of a tensor-parallel group needs beside its workload: the group's NCCL
// communicator, created from the id rank 0 made (the daemon relays it) or kept from the
// group's last experiment, and the deadline the rank gives up at.
#ifndef GPUPROF_WORKLOADS_GPU_DRIVER_RANK_GROUP_H_
#define GPUPROF_WORKLOADS_GPU_DRIVER_RANK_GROUP_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/nccl_communicator.h"
#include "gpuprof/worker_protocol/worker_protocol.pb.h"

namespace gpuprof::workloads {

// The experiment's deadline on this rank: its timeout from now, less a margin, so that a
// missing peer ends the experiment with this rank's own account of it; the daemon's kill at
// the deadline is for a rank whose abort hangs too.
absl::Time RankDeadline(const gpuprof::worker_protocol::ExperimentAssignment& assignment);

// The group's communicator on this worker's GPU (CUDA device 0): the kept one when the daemon
// says every rank is the same process as last time, else a new one from the relayed id
// (replacing what was kept). A world of one makes its own id. The process keeps it.
absl::StatusOr<comm::NcclCommunicator*> RankGroupCommunicator(
    const gpuprof::worker_protocol::ExperimentAssignment& assignment, absl::Time deadline);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_GPU_DRIVER_RANK_GROUP_H_
