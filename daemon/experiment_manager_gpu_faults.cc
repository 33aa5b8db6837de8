// The manager's side of GPU faults (daemon/gpu_health/ decides what a fault means and keeps
// the drained GPUs): the experiments a fault ends, the workers it stops, the audit of a clear.
// Beside experiment_manager.cc because these change the lifecycle state under the same lock.
#include "absl/strings/str_cat.h"
#include "daemon/experiment_manager.h"
#include "daemon/experiment_record.h"

namespace gpuprof::daemon {

absl::Status ExperimentManager::RestoreDrainedGpus() {
  ASSIGN_OR_RETURN(const GpuHealthState::Restored restored, gpu_health_.Restore(inventory_));
  for (const ExperimentStore::DrainedGpu& gone : restored.missing) {
    Log(absl::StrCat("drained GPU ", gone.uuid, " (was GPU ", gone.gpu_index,
                     ") is not on this host any more; its record stays until an admin "
                     "clears it"));
  }
  absl::MutexLock lock(&mutex_);
  for (const ExperimentStore::DrainedGpu& drained : restored.drained) {
    scheduler_->SetGpuDrained(drained.gpu_index, true);
    Log(absl::StrCat("GPU ", drained.gpu_index,
                     " stays drained until an admin clears it: ", drained.reason));
  }
  return absl::OkStatus();
}

void ExperimentManager::SetGpuHealthWatched(const std::vector<int>& gpus) {
  gpu_health_.SetWatched(gpus);
}

void ExperimentManager::FailExperimentOnGpuLocked(const GpuFault& fault,
                                                  const std::string& consequence) {
  const std::map<int, std::string> leases = scheduler_->GpuLeases();
  const auto lease = leases.find(fault.gpu);
  if (lease == leases.end()) return;
  const auto it = active_.find(lease->second);
  // Being killed already (timeout, preemption): that ending stands.
  if (it == active_.end() || it->second.workers.empty() || it->second.ending ||
      it->second.preempting) {
    return;
  }
  const std::string id = it->first;
  workers_.Kill(it->second.experiment.id());
  EndLocked(id, v1::FAILED,
            absl::StrCat("GPU ", fault.gpu, " reported ", fault.description, "; ", consequence), "",
            &fault);
  Log(absl::StrCat(id, " failed: GPU ", fault.gpu, " reported ", fault.description));
}

void ExperimentManager::ReportGpuFault(const GpuFault& fault) {
  absl::MutexLock lock(&mutex_);
  if (fault.gpu < 0 || fault.gpu >= inventory_.gpus_size() || stopping_) return;
  if (fault.xid != 0) {
    gpu_health_.RecordXid(fault.gpu, fault.xid);
    if (observer_ != nullptr) observer_->GpuXid(fault.gpu, fault.fault_class);
  }
  if (fault.fault_class == v1::GPU_FAULT_CLASS_APPLICATION) {
    FailExperimentOnGpuLocked(fault, "an application fault: the GPU stays in service");
    return;
  }
  if (fault.fault_class != v1::GPU_FAULT_CLASS_HARDWARE) {
    Log(absl::StrCat("GPU ", fault.gpu, " reported ", fault.description,
                     " (not known to need action)"));
    return;
  }
  FailExperimentOnGpuLocked(
      fault, "a hardware fault: the GPU is drained until an admin clears it (gpuprof gpu clear)");
  const v1::GpuInfo& info = inventory_.gpus(fault.gpu);
  const GpuHealthState::DrainResult drain = gpu_health_.Drain(info, fault, absl::Now());
  if (!drain.drained_now) return;  // drained already; the first reason stands
  scheduler_->SetGpuDrained(fault.gpu, true);
  // Idle workers on it would be handed the next experiment on these GPUs: stop them.
  workers_.RetireIdleOn(fault.gpu);
  Log(absl::StrCat("GPU ", fault.gpu, " drained: ", fault.description,
                   drain.stored.ok() ? ""
                                     : absl::StrCat(" (not stored: ", drain.stored.message(),
                                                    "; a restart would forget the drain)")));
  v1::AuditEntry entry;
  entry.set_actor("gpuprofd");
  entry.set_action("gpu-drain");
  entry.set_detail(absl::StrCat("GPU ", fault.gpu, " (", info.uuid(), "): ", fault.description));
  entry.set_authenticated_by("nvml");
  RecordAudit(std::move(entry));
  wake_.Signal();
}

void ExperimentManager::ReportGpuMemoryErrors(int gpu, const v1::GpuMemoryErrors& errors) {
  if (gpu < 0 || gpu >= inventory_.gpus_size()) return;
  gpu_health_.SetMemoryErrors(gpu, errors);
}

absl::StatusOr<v1::GpuInfo> ExperimentManager::ClearGpuHealth(int gpu, const std::string& reason,
                                                              const Actor& actor) {
  // Who asks comes first: a non-admin learns nothing about the GPUs (which index exists,
  // which is drained), and the refusal is audited and counted without the manager's lock.
  if (!actor.admin) {
    return admission_.Refuse(
        actor, "", "not-admin",
        absl::PermissionDeniedError(
            absl::StrCat("only admins may return a drained GPU to service (ClearGpuHealth of GPU ",
                         gpu, "; you are ", actor.user, ", ", actor.authenticated_by, ")")));
  }
  absl::MutexLock lock(&mutex_);
  if (gpu < 0 || gpu >= inventory_.gpus_size()) {
    return absl::InvalidArgumentError(
        inventory_.gpus().empty()
            ? absl::StrCat("gpu_index: got ", gpu, "; this host has no GPUs")
            : absl::StrCat("gpu_index: got ", gpu, "; this host has GPUs 0 to ",
                           inventory_.gpus_size() - 1));
  }
  RETURN_IF_ERROR(CheckPrintableText("reason", reason));
  const v1::GpuInfo& info = inventory_.gpus(gpu);
  ASSIGN_OR_RETURN(const std::string was, gpu_health_.Clear(info));
  scheduler_->SetGpuDrained(gpu, false);
  v1::AuditEntry entry;
  entry.set_actor(actor.user);
  entry.set_action("gpu-clear");
  entry.set_detail(absl::StrCat("GPU ", gpu, " (", info.uuid(), ") back in service",
                                reason.empty() ? "" : absl::StrCat(": ", reason),
                                "; it was drained for ", was));
  entry.set_authenticated_by(actor.authenticated_by);
  RecordAudit(std::move(entry));
  Log(absl::StrCat("GPU ", gpu, " cleared by ", actor.user, "; back in service"));
  wake_.Signal();
  v1::GpuInfo cleared = info;
  gpu_health_.Fill(cleared);
  return cleared;
}

}  // namespace gpuprof::daemon
