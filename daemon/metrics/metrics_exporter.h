// Everything gpuprofd needs for its Prometheus metrics in one object: the metrics themselves
// (observers for the manager and the gRPC service), the HTTP endpoint, and a background thread
// that samples the gauges (queue depth, leases, store size, NVML telemetry).
#ifndef GPUPROF_DAEMON_METRICS_METRICS_EXPORTER_H_
#define GPUPROF_DAEMON_METRICS_METRICS_EXPORTER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/experiment_manager.h"
#include "daemon/metrics/gpu_telemetry_reader.h"
#include "daemon/metrics/prometheus_daemon_metrics.h"
#include "daemon/server/connection_limit.h"
#include "daemon/server/profiler_service.h"
#include "daemon/store/store_space_monitor.h"

namespace gpuprof::daemon {

class MetricsExporter {
 public:
  // Sampling is cheap (a few NVML calls per GPU, one SQLite pragma), so every two seconds
  // keeps the gauges fresh for short scrape intervals.
  static constexpr absl::Duration kDefaultSampleInterval = absl::Seconds(2);

  // `nvml_path`: the NVML library telemetry is read through; `recent`: how long, and how many,
  // ended experiments and sweeps keep their run series (annotations, per-point figures).
  explicit MetricsExporter(absl::string_view version,
                           std::string nvml_path = "libnvidia-ml.so.1",
                           RecentSeriesLimits recent = {});
  // Stops sampling and serving.
  ~MetricsExporter();
  MetricsExporter(const MetricsExporter&) = delete;
  MetricsExporter& operator=(const MetricsExporter&) = delete;

  // Hand these to ExperimentManager::Create and ProfilerService; they must not outlive this.
  ManagerObserver* manager_observer() { return &metrics_; }
  SweepObserver* sweep_observer() { return &metrics_; }
  RpcObserver rpc_observer();

  // Serves /metrics on `address` (port 0 picks one), loads NVML for the manager's GPUs when it
  // can (logging why not), takes a first sample and starts the sampler thread.
  absl::Status Start(ExperimentManager* manager, const std::string& address,
                     absl::Duration sample_interval = kDefaultSampleInterval);
  // Samples the connection count and refusals of `limit` too; call before Start. `limit` must
  // outlive Stop.
  void SampleConnections(ConnectionLimit* limit) { connections_ = limit; }
  // Samples the free space under the store and whether it is read-only; call before Start.
  // `monitor` must outlive Stop.
  void SampleStoreSpace(const StoreSpaceMonitor* monitor) { store_space_ = monitor; }
  // The bound port, 0 before Start.
  int port() const { return metrics_.port(); }
  // Reports the daemon down and stops the sampler; call before the manager shuts down.
  // Idempotent.
  void Stop();

 private:
  void SampleOnce();
  void SampleLoop(absl::Duration interval);

  PrometheusDaemonMetrics metrics_;
  const std::string nvml_path_;
  ExperimentManager* manager_ = nullptr;
  ConnectionLimit* connections_ = nullptr;
  const StoreSpaceMonitor* store_space_ = nullptr;
  std::unique_ptr<GpuTelemetryReader> telemetry_;  // null without NVML

  absl::Mutex mutex_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread sampler_;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_METRICS_METRICS_EXPORTER_H_
