// DaemonMetrics exported in the Prometheus text format with prometheus-cpp, on its own HTTP
// port (loopback by default: metrics say what runs on the machine). Names follow Prometheus'
// rules: gpuprof_ prefix, base units (_seconds, _bytes, _hertz, _watts), _total counters and
// 0..1 ratios. Labels are bounded sets (workload, state, GPU index, RPC method, ...); an
// experiment or sweep id, and its user, label only the run series (RecentSeries: kept for a
// window after the run ended, capped in number) and the lease of a GPU held now.
// docs/metrics.md describes every metric.
#ifndef GPUPROF_DAEMON_METRICS_PROMETHEUS_DAEMON_METRICS_H_
#define GPUPROF_DAEMON_METRICS_PROMETHEUS_DAEMON_METRICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "daemon/metrics/daemon_metrics.h"
#include "daemon/metrics/recent_series.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace gpuprof::daemon {

class PrometheusDaemonMetrics final : public DaemonMetrics {
 public:
  // `version` goes into gpuprof_build_info; `recent` bounds the run series; `hostname` labels
  // the per-GPU info series as dcgm-exporter's Hostname does (empty: this host's name).
  explicit PrometheusDaemonMetrics(absl::string_view version, RecentSeriesLimits recent = {},
                                   std::string hostname = "");
  ~PrometheusDaemonMetrics() override;
  PrometheusDaemonMetrics(const PrometheusDaemonMetrics&) = delete;
  PrometheusDaemonMetrics& operator=(const PrometheusDaemonMetrics&) = delete;

  // Serves GET /metrics on `address` ("127.0.0.1:9464"; port 0 picks a free one). Fails when
  // the address cannot be bound. Call at most once.
  absl::Status Serve(const std::string& address);
  // The port Serve bound, or 0 before Serve.
  int port() const;

  // What a scrape returns right now, in the Prometheus text format.
  std::string ExpositionText() const;

  // gpuprof_up: 1 while the daemon serves, 0 once it is shutting down.
  void SetUp(bool up);

  // Removes the run series whose window has passed; the sampler calls it.
  void ExpireRecentRuns(absl::Time now) { recent_->Expire(now); }

  // ManagerObserver.
  void ExperimentStarted(const v1::Experiment& experiment) override;
  void ExperimentEnded(const v1::Experiment& experiment) override;
  void WorkerFailed(bool timed_out) override;
  void Refused(const std::string& reason) override;
  void Preempted() override;
  void GpuXid(int gpu, v1::GpuFaultClass fault_class) override;

  // SweepObserver.
  void SweepStarted(const v1::Sweep& sweep) override;
  void SweepEnded(const v1::Sweep& sweep) override;

  // DaemonMetrics.
  void RpcFinished(absl::string_view method, grpc::StatusCode code) override;
  void SetGpuInventory(const v1::ListGpusResponse& inventory) override;
  void SetQueuedExperiments(int64_t count) override;
  void SetOldestQueuedExperimentAge(absl::Duration age) override;
  void SetGpuLeases(const std::map<int, std::string>& leases) override;
  void SetStoreSizeBytes(int64_t bytes) override;
  void SetStoreDamagedRows(int64_t rows) override;
  void SetStoreSpace(int64_t free_bytes, bool read_only) override;
  void SetUserQuotaUse(const std::vector<v1::QuotaReport>& use) override;
  void SetConnections(int64_t live, int64_t refused_total) override;
  void SetTelemetryAvailable(bool available) override;
  void SetGpuTelemetry(const GpuTelemetry& telemetry) override;
  void SetGpuHealth(const v1::ListGpusResponse& gpus) override;

 private:
  // What identifies a running experiment in the lease series.
  struct RunningExperiment {
    std::string user;
    std::string workload;
  };
  // The best headline of a running sweep's finished points so far, for its end annotation.
  struct SweepBest {
    double value = 0;
    bool higher_is_better = true;
    std::string text;
    int point = 0;
  };

  // What /metrics serves, in order: the served endpoint and ExpositionText use this one list.
  std::vector<std::shared_ptr<prometheus::Collectable>> Collectables() const;
  void RecordResult(const v1::Experiment& experiment);
  void RecordRun(const v1::Experiment& experiment);
  // Points gpuprof_gpu_lease_info of `gpu` at experiment `id` (empty: free).
  void SetLeaseLocked(int gpu, const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // Declared first: the families below live in it.
  const std::shared_ptr<prometheus::Registry> registry_;

  // The daemon.
  prometheus::Gauge& up_;
  prometheus::Family<prometheus::Gauge>& build_info_;
  prometheus::Family<prometheus::Counter>& experiments_;
  prometheus::Gauge& queued_experiments_;
  prometheus::Family<prometheus::Histogram>& queue_seconds_;
  prometheus::Family<prometheus::Histogram>& run_seconds_;
  prometheus::Gauge& gpus_;
  prometheus::Family<prometheus::Gauge>& gpu_info_;
  prometheus::Family<prometheus::Gauge>& gpu_leased_;
  prometheus::Family<prometheus::Gauge>& gpu_lease_info_;
  prometheus::Gauge& oldest_queued_age_;
  prometheus::Family<prometheus::Counter>& worker_failures_;
  prometheus::Family<prometheus::Counter>& grpc_requests_;
  prometheus::Family<prometheus::Counter>& access_refusals_;
  prometheus::Counter& preemptions_;
  prometheus::Gauge& connections_;
  prometheus::Counter& connections_refused_;
  absl::Mutex connections_mutex_;
  int64_t connections_refused_reported_ ABSL_GUARDED_BY(connections_mutex_) = 0;
  prometheus::Family<prometheus::Gauge>& user_queued_;
  prometheus::Family<prometheus::Gauge>& user_gpus_;
  prometheus::Family<prometheus::Gauge>& user_gpu_hours_;
  absl::Mutex quota_mutex_;
  std::set<std::string> quota_users_ ABSL_GUARDED_BY(quota_mutex_);  // users with series now
  prometheus::Gauge& store_size_bytes_;
  prometheus::Gauge& store_damaged_rows_;
  prometheus::Gauge& store_disk_free_bytes_;
  prometheus::Gauge& store_read_only_;

  // Results: the latest value of each kind, per bounded label set; a series appears with the
  // first result that has it. Attention's carry its phase (workloads/headline.h).
  prometheus::Family<prometheus::Gauge>& result_bandwidth_;
  prometheus::Family<prometheus::Gauge>& result_copy_bandwidth_ratio_;
  prometheus::Family<prometheus::Gauge>& result_collective_bus_bandwidth_;
  prometheus::Family<prometheus::Gauge>& result_attention_flops_;
  // No series until a radix experiment finished here: a node that never ran one has no ratio.
  prometheus::Family<prometheus::Gauge>& result_radix_hit_ratio_;
  prometheus::Family<prometheus::Gauge>& result_radix_operations_;

  // Every finished experiment's headline, by workload, phase, figure and unit.
  prometheus::Family<prometheus::Histogram>& result_headline_;

  // Run series (annotations, every point's figure), bounded by recent_.
  const std::shared_ptr<RecentSeries> recent_;
  const RecentSeries::Family experiment_start_;
  const RecentSeries::Family experiment_end_;
  const RecentSeries::Family experiment_headline_;
  const RecentSeries::Family sweep_start_;
  const RecentSeries::Family sweep_end_;

  // GPU telemetry (NVML).
  prometheus::Gauge& nvml_available_;
  prometheus::Family<prometheus::Gauge>& gpu_utilization_;
  prometheus::Family<prometheus::Gauge>& gpu_memory_controller_utilization_;
  prometheus::Family<prometheus::Gauge>& gpu_memory_used_;
  prometheus::Family<prometheus::Gauge>& gpu_memory_total_;
  prometheus::Family<prometheus::Gauge>& gpu_sm_clock_;
  prometheus::Family<prometheus::Gauge>& gpu_temperature_;
  prometheus::Family<prometheus::Gauge>& gpu_power_;
  prometheus::Family<prometheus::Gauge>& gpu_throttle_reason_;

  // GPU health.
  prometheus::Family<prometheus::Gauge>& gpu_healthy_;
  prometheus::Family<prometheus::Counter>& gpu_xid_events_;
  prometheus::Family<prometheus::Gauge>& gpu_memory_errors_;

  const std::string hostname_;
  mutable absl::Mutex mutex_;
  std::vector<int> gpu_indices_ ABSL_GUARDED_BY(mutex_);
  // dcgm-exporter's labels of each GPU (gpu, UUID, modelName, Hostname), by index.
  std::map<int, prometheus::Labels> gpu_labels_ ABSL_GUARDED_BY(mutex_);
  // The lease series of each leased GPU, and the experiment it names.
  std::map<int, std::pair<std::string, prometheus::Labels>> leases_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, RunningExperiment> running_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, SweepBest> sweep_best_ ABSL_GUARDED_BY(mutex_);
  std::unique_ptr<prometheus::Exposer> exposer_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_METRICS_PROMETHEUS_DAEMON_METRICS_H_
