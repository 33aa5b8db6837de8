#include "daemon/gpu_health/gpu_health_state.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace gpuprof::daemon {

GpuHealthState::GpuHealthState(ExperimentStore& store) : store_(store) {}

absl::StatusOr<GpuHealthState::Restored> GpuHealthState::Restore(
    const v1::ListGpusResponse& inventory) {
  ASSIGN_OR_RETURN(std::vector<ExperimentStore::DrainedGpu> records, store_.ListDrainedGpus());
  Restored restored;
  absl::MutexLock lock(&mutex_);
  for (ExperimentStore::DrainedGpu& record : records) {
    const auto gpu =
        std::find_if(inventory.gpus().begin(), inventory.gpus().end(),
                     [&](const v1::GpuInfo& info) { return info.uuid() == record.uuid; });
    if (gpu == inventory.gpus().end()) {
      restored.missing.push_back(std::move(record));
      continue;
    }
    Health& health = health_[gpu->index()];
    health.drained = true;
    health.reason = record.reason;
    health.since = absl::FromUnixNanos(record.since_unix_ns);
    health.last_xid = record.xid;
    record.gpu_index = gpu->index();
    restored.drained.push_back(std::move(record));
  }
  return restored;
}

void GpuHealthState::SetWatched(const std::vector<int>& gpus) {
  absl::MutexLock lock(&mutex_);
  for (int gpu : gpus) health_[gpu].watched = true;
}

void GpuHealthState::RecordXid(int gpu, int xid) {
  absl::MutexLock lock(&mutex_);
  Health& health = health_[gpu];
  health.last_xid = xid;
  ++health.xid_events;
}

void GpuHealthState::SetMemoryErrors(int gpu, const v1::GpuMemoryErrors& errors) {
  absl::MutexLock lock(&mutex_);
  health_[gpu].memory_errors = errors;
}

GpuHealthState::DrainResult GpuHealthState::Drain(const v1::GpuInfo& gpu, const GpuFault& fault,
                                                  absl::Time now) {
  absl::MutexLock lock(&mutex_);
  Health& health = health_[gpu.index()];
  if (health.drained) return DrainResult{};
  health.drained = true;
  health.reason = fault.description;
  health.since = now;
  return DrainResult{
      .drained_now = true,
      .stored = store_.SaveDrainedGpu(ExperimentStore::DrainedGpu{
          gpu.uuid(), gpu.index(), absl::ToUnixNanos(now), fault.xid, fault.description})};
}

absl::StatusOr<std::string> GpuHealthState::Clear(const v1::GpuInfo& gpu) {
  absl::MutexLock lock(&mutex_);
  Health& health = health_[gpu.index()];
  if (!health.drained) {
    return absl::FailedPreconditionError(
        absl::StrCat("GPU ", gpu.index(), " is not drained; there is nothing to clear"));
  }
  if (absl::Status deleted = store_.DeleteDrainedGpu(gpu.uuid());
      !deleted.ok() && !absl::IsNotFound(deleted)) {
    return absl::UnavailableError(absl::StrCat("GPU ", gpu.index(),
                                               " stays drained: the clear could not be stored (",
                                               deleted.message(), ")"));
  }
  health.drained = false;
  return std::exchange(health.reason, "");
}

bool GpuHealthState::IsDrained(int gpu) const {
  absl::MutexLock lock(&mutex_);
  const auto it = health_.find(gpu);
  return it != health_.end() && it->second.drained;
}

void GpuHealthState::Fill(v1::GpuInfo& gpu) const {
  absl::MutexLock lock(&mutex_);
  const auto it = health_.find(gpu.index());
  if (it == health_.end()) return;
  const Health& health = it->second;
  if (health.drained) {
    gpu.set_health(v1::GPU_HEALTH_UNHEALTHY);
    gpu.set_health_reason(health.reason);
    const int64_t nanos = absl::ToUnixNanos(health.since);
    gpu.mutable_unhealthy_since()->set_seconds(nanos / 1'000'000'000);
    gpu.mutable_unhealthy_since()->set_nanos(static_cast<int32_t>(nanos % 1'000'000'000));
  } else if (health.watched) {
    gpu.set_health(v1::GPU_HEALTH_HEALTHY);
  }
  gpu.set_last_xid(health.last_xid);
  gpu.set_xid_events(health.xid_events);
  if (health.memory_errors.has_value()) *gpu.mutable_memory_errors() = *health.memory_errors;
}

}  // namespace gpuprof::daemon
