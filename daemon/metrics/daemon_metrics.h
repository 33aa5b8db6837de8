// What gpuprofd reports for monitoring, independent of how it is exported. The experiment
// manager and the gRPC service push events into it; a sampler sets the gauges. Prometheus
// (prometheus_daemon_metrics.h) is the implementation; docs/metrics.md lists every metric.
#ifndef GPUPROF_DAEMON_METRICS_DAEMON_METRICS_H_
#define GPUPROF_DAEMON_METRICS_DAEMON_METRICS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/experiment_manager.h"
#include "daemon/sweep_manager.h"
#include "gpuprof/v1/access.pb.h"
#include "gpuprof/v1/gpus.pb.h"
#include "grpcpp/support/status.h"

namespace gpuprof::daemon {

// One GPU's telemetry sample. A field is empty when NVML cannot read it on this GPU (not
// supported, no permission), so that an unreadable value is never exported as a zero.
struct GpuTelemetry {
  int gpu = 0;  // physical index, as in ListGpus
  std::optional<double> utilization_ratio;
  std::optional<double> memory_controller_utilization_ratio;
  std::optional<double> memory_used_bytes;
  std::optional<double> memory_total_bytes;
  std::optional<double> sm_clock_hertz;
  std::optional<double> temperature_celsius;
  std::optional<double> power_watts;
  // NVML's clocks-event-reason bit mask (why clocks are below their maximum).
  std::optional<uint64_t> clocks_event_reasons;
};

// Implementations are thread-safe: events come from the manager (with its lock held) and from
// gRPC threads, gauges from the sampler thread. No method may block.
class DaemonMetrics : public ManagerObserver, public SweepObserver {
 public:
  ~DaemonMetrics() override = default;

  // ManagerObserver: ExperimentStarted/Ended(experiment), WorkerFailed(timed_out), ...
  // SweepObserver: SweepStarted/Ended(sweep).

  // One finished RPC of the Profiler service.
  virtual void RpcFinished(absl::string_view method, grpc::StatusCode code) = 0;

  // The GPUs this daemon owns, set once at start-up: per-GPU series start from this list.
  virtual void SetGpuInventory(const v1::ListGpusResponse& inventory) = 0;
  virtual void SetQueuedExperiments(int64_t count) = 0;
  // How long the first submitted experiment still queued has waited (0: none queued).
  virtual void SetOldestQueuedExperimentAge(absl::Duration age) {}
  // GPU index -> id of the experiment holding it; GPUs not in the map are free.
  virtual void SetGpuLeases(const std::map<int, std::string>& leases) = 0;
  virtual void SetStoreSizeBytes(int64_t bytes) = 0;
  // Rows of the store found damaged (their proto does not parse) and skipped since start-up.
  virtual void SetStoreDamagedRows(int64_t rows) {}
  // Free bytes on the disk holding the database (negative: unknown, left unset), and whether
  // the store serves reads only because that disk is full.
  virtual void SetStoreSpace(int64_t free_bytes, bool read_only) {}
  // Quota use of the users named in the access policy, and of everyone else as "(other)"
  // (kOtherUsers; gpu_hours_last_day unset for it): replaces the previous set.
  virtual void SetUserQuotaUse(const std::vector<v1::QuotaReport>& use) {}
  // Client connections open now, and refused over --max_connections since the start.
  virtual void SetConnections(int64_t live, int64_t refused_total) {}
  // Whether NVML telemetry is collected (false on machines without the driver).
  virtual void SetTelemetryAvailable(bool available) = 0;
  virtual void SetGpuTelemetry(const GpuTelemetry& telemetry) = 0;
  // Each GPU's health and memory error counters, as ListGpus shows them.
  virtual void SetGpuHealth(const v1::ListGpusResponse& gpus) {}
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_METRICS_DAEMON_METRICS_H_
