#include "workloads/gpu_driver/rank_group.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "google/protobuf/util/time_util.h"

namespace gpuprof::workloads {
namespace {

// The communicator a rank worker keeps between the experiments of its group. Never destroyed:
// at exit the process goes, and NCCL's state with it, without waiting on peers that may
// already be gone.
struct KeptCommunicator {
  int world_size = 0;
  int rank = -1;
  std::unique_ptr<comm::NcclCommunicator> communicator;
};

KeptCommunicator& Kept() {
  static auto* kept = new KeptCommunicator();
  return *kept;
}

}  // namespace

absl::Time RankDeadline(const worker_protocol::ExperimentAssignment& assignment) {
  const absl::Duration timeout = absl::Nanoseconds(
      google::protobuf::util::TimeUtil::DurationToNanoseconds(assignment.request().timeout()));
  return absl::Now() + timeout - std::min(absl::Seconds(2), timeout / 10);
}

absl::StatusOr<comm::NcclCommunicator*> RankGroupCommunicator(
    const worker_protocol::ExperimentAssignment& assignment, absl::Time deadline) {
  KeptCommunicator& kept = Kept();
  const int world_size = std::max(1, assignment.world_size());
  if (assignment.reuse_communicator() && kept.communicator != nullptr &&
      kept.communicator->usable() && kept.world_size == world_size &&
      kept.rank == assignment.rank()) {
    return kept.communicator.get();
  }
  kept.communicator.reset();
  ncclUniqueId id{};
  if (world_size == 1) {
    ASSIGN_OR_RETURN(id, comm::CreateUniqueId());
  } else {
    ASSIGN_OR_RETURN(id, comm::ParseUniqueId(assignment.nccl_unique_id()));
  }
  ASSIGN_OR_RETURN(
      comm::NcclCommunicator created,
      comm::NcclCommunicator::Create(
          {.unique_id = id,
           .nranks = world_size,
           .rank = assignment.rank(),
           .device = 0,
           .init_timeout = std::max(absl::Seconds(1), deadline - absl::Now()),
           .name = absl::StrCat("gpuprof-", assignment.experiment_id())}));
  kept.world_size = world_size;
  kept.rank = assignment.rank();
  kept.communicator = std::make_unique<comm::NcclCommunicator>(std::move(created));
  return kept.communicator.get();
}

}  // namespace gpuprof::workloads
