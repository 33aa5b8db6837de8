// The host's GPU inventory, as a short-lived worker process reports it: the daemon never
// creates a CUDA context of its own (a sticky CUDA error would take the daemon with it).
#ifndef GPUPROF_DAEMON_SCHEDULING_INVENTORY_PROBE_H_
#define GPUPROF_DAEMON_SCHEDULING_INVENTORY_PROBE_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/scheduling/worker_process.h"
#include "gpuprof/v1/gpus.pb.h"

namespace gpuprof::daemon {

struct InventoryProbeOptions {
  WorkerLaunch launch;
  // Time each GPU's device-to-device copy (about a second per GPU).
  bool measure_copy_bandwidth = true;
  absl::Duration timeout = absl::Seconds(180);
};

// An error only when the worker cannot be started (a wrong --worker_binary: nothing would run).
// A worker that dies or does not answer in time gives an inventory without GPUs whose
// probe_error says so, so that the daemon still serves listing and the CPU workloads.
absl::StatusOr<v1::ListGpusResponse> ProbeInventory(const InventoryProbeOptions& options);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_SCHEDULING_INVENTORY_PROBE_H_
