// The health of the host's GPUs as the daemon serves it (`gpuprof gpus`, the scheduler): which
// are watched, which are drained by a hardware fault and why, the Xids counted and the last
// memory error counters. A drain is stored and outlives a restart until an admin clears it.
// What a fault means is gpu_faults.h; who reports it, gpu_health_monitor.h.
#ifndef GPUPROF_DAEMON_GPU_HEALTH_GPU_HEALTH_STATE_H_
#define GPUPROF_DAEMON_GPU_HEALTH_GPU_HEALTH_STATE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/gpu_health/gpu_faults.h"
#include "daemon/store/experiment_store.h"
#include "gpuprof/v1/gpus.pb.h"

namespace gpuprof::daemon {

// Thread-safe. The experiment manager calls it with its own lock held (the order is always
// the manager's lock, then this one; this class calls nothing back), so that a drain, the
// scheduler's drained set and the failing of the experiment on the GPU change together.
class GpuHealthState {
 public:
  // `store` keeps the drains; it must outlive this object.
  explicit GpuHealthState(ExperimentStore& store);
  GpuHealthState(const GpuHealthState&) = delete;
  GpuHealthState& operator=(const GpuHealthState&) = delete;

  // The drains the store holds (an admin has not cleared them), matched to `inventory` by
  // UUID: the index may have changed since (GPUs added or removed).
  struct Restored {
    // The drains back in force, each with the GPU's index on this host now.
    std::vector<ExperimentStore::DrainedGpu> drained;
    // Records of GPUs this host no longer has: they stay stored until an admin clears them.
    std::vector<ExperimentStore::DrainedGpu> missing;
  };
  absl::StatusOr<Restored> Restore(const v1::ListGpusResponse& inventory);

  // These GPUs' health is watched: they show HEALTHY (not "not watched") unless drained.
  void SetWatched(const std::vector<int>& gpus);
  // Counts an Xid reported on `gpu` and keeps it as the last one.
  void RecordXid(int gpu, int xid);
  void SetMemoryErrors(int gpu, const v1::GpuMemoryErrors& errors);

  struct DrainResult {
    // False when the GPU was drained already: the first reason stands.
    bool drained_now = false;
    // Whether the drain was stored; one that was not holds until the daemon stops.
    absl::Status stored;
  };
  // Drains `gpu` (no new leases) for a hardware `fault`, stored by the GPU's UUID.
  DrainResult Drain(const v1::GpuInfo& gpu, const GpuFault& fault, absl::Time now);
  // Returns a drained GPU to service, the store first (a clear that did not reach the disk
  // would come back after a restart); returns the reason it was drained for.
  // FAILED_PRECONDITION when it is not drained, UNAVAILABLE when the store refused.
  absl::StatusOr<std::string> Clear(const v1::GpuInfo& gpu);

  bool IsDrained(int gpu) const;
  // ListGpus' health fields of `gpu` (by its index): health and its reason and time, the last
  // Xid, the Xid count, the memory error counters.
  void Fill(v1::GpuInfo& gpu) const;

 private:
  struct Health {
    bool watched = false;
    bool drained = false;
    std::string reason;
    absl::Time since;
    int last_xid = 0;
    int64_t xid_events = 0;
    std::optional<v1::GpuMemoryErrors> memory_errors;
  };

  ExperimentStore& store_;
  mutable absl::Mutex mutex_;
  std::map<int, Health> health_ ABSL_GUARDED_BY(mutex_);  // by GPU index
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_GPU_HEALTH_GPU_HEALTH_STATE_H_
