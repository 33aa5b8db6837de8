// The name of every metric gpuprofd exports, in one place: the exporter registers these, and
// the dashboard tests check that every metric a panel queries is one of them (panels whose
// metrics only a GPU machine produces cannot prove that with data in CPU-only CI).
#ifndef GPUPROF_DAEMON_METRICS_METRIC_NAMES_H_
#define GPUPROF_DAEMON_METRICS_METRIC_NAMES_H_

namespace gpuprof::daemon::metric_names {

// The daemon.
inline constexpr char kUp[] = "gpuprof_up";
inline constexpr char kBuildInfo[] = "gpuprof_build_info";
inline constexpr char kExperiments[] = "gpuprof_experiments_total";
inline constexpr char kQueuedExperiments[] = "gpuprof_queued_experiments";
inline constexpr char kOldestQueuedExperimentAge[] = "gpuprof_oldest_queued_experiment_age_seconds";
inline constexpr char kExperimentQueueSeconds[] = "gpuprof_experiment_queue_seconds";
inline constexpr char kExperimentRunSeconds[] = "gpuprof_experiment_run_seconds";
inline constexpr char kGpus[] = "gpuprof_gpus";
inline constexpr char kGpuInfo[] = "gpuprof_gpu_info";
inline constexpr char kGpuLeased[] = "gpuprof_gpu_leased";
// Who holds each leased GPU: experiment, user, workload, with dcgm-exporter's GPU labels.
inline constexpr char kGpuLeaseInfo[] = "gpuprof_gpu_lease_info";
inline constexpr char kWorkerFailures[] = "gpuprof_worker_failures_total";
inline constexpr char kGrpcRequests[] = "gpuprof_grpc_requests_total";
inline constexpr char kStoreSizeBytes[] = "gpuprof_store_size_bytes";
inline constexpr char kStoreDamagedRows[] = "gpuprof_store_damaged_rows";
inline constexpr char kStoreDiskFreeBytes[] = "gpuprof_store_disk_free_bytes";
inline constexpr char kStoreReadOnly[] = "gpuprof_store_read_only";
inline constexpr char kAccessRefusals[] = "gpuprof_access_refusals_total";
inline constexpr char kPreemptions[] = "gpuprof_preemptions_total";
// Where a Submit's and a store commit's time goes (latency_phases.h).
inline constexpr char kSubmitPhaseSeconds[] = "gpuprof_submit_phase_seconds";
inline constexpr char kStoreCommitPhaseSeconds[] = "gpuprof_store_commit_phase_seconds";
inline constexpr char kStoreCommitBatchWrites[] = "gpuprof_store_commit_batch_writes";
inline constexpr char kConnections[] = "gpuprof_connections";
inline constexpr char kConnectionsRefused[] = "gpuprof_connections_refused_total";
// Per user: only users with a `users` entry in the access policy get their own series, everyone
// else is summed as user="(other)" (kOtherUsers, which no policy user name can be), so the
// label set is bounded by the policy.
inline constexpr char kUserQueuedExperiments[] = "gpuprof_user_queued_experiments";
inline constexpr char kUserGpusInUse[] = "gpuprof_user_gpus_in_use";
inline constexpr char kUserGpuHoursLastDay[] = "gpuprof_user_gpu_hours_last_day";

// Runs: series carrying an experiment or sweep id, kept for a bounded window after the run
// ended (daemon/metrics/recent_series.h), for annotations and every sweep point's figure.
inline constexpr char kExperimentStartTimestamp[] = "gpuprof_experiment_start_timestamp_seconds";
inline constexpr char kExperimentEndTimestamp[] = "gpuprof_experiment_end_timestamp_seconds";
inline constexpr char kExperimentHeadline[] = "gpuprof_experiment_headline";
inline constexpr char kSweepStartTimestamp[] = "gpuprof_sweep_start_timestamp_seconds";
inline constexpr char kSweepEndTimestamp[] = "gpuprof_sweep_end_timestamp_seconds";

// Results.
// Every finished experiment's headline, by workload, phase and figure: a histogram, so that
// rates and distributions count every result, not the last one before a scrape.
inline constexpr char kResultHeadline[] = "gpuprof_result_headline";
inline constexpr char kResultBandwidth[] = "gpuprof_result_bandwidth_bytes_per_second";
inline constexpr char kResultCopyBandwidthRatio[] = "gpuprof_result_copy_bandwidth_ratio";
inline constexpr char kResultCollectiveBusBandwidth[] =
    "gpuprof_result_collective_bus_bandwidth_bytes_per_second";
inline constexpr char kResultAttentionFlops[] = "gpuprof_result_attention_flops_per_second";
inline constexpr char kResultRadixHitRatio[] = "gpuprof_result_radix_hit_ratio";
inline constexpr char kResultRadixOperations[] = "gpuprof_result_radix_operations_per_second";

// GPU telemetry (NVML).
inline constexpr char kNvmlAvailable[] = "gpuprof_nvml_available";
inline constexpr char kGpuUtilization[] = "gpuprof_gpu_utilization_ratio";
inline constexpr char kGpuMemoryControllerUtilization[] =
    "gpuprof_gpu_memory_controller_utilization_ratio";
inline constexpr char kGpuMemoryUsed[] = "gpuprof_gpu_memory_used_bytes";
inline constexpr char kGpuMemoryTotal[] = "gpuprof_gpu_memory_total_bytes";
inline constexpr char kGpuSmClock[] = "gpuprof_gpu_sm_clock_hertz";
inline constexpr char kGpuTemperature[] = "gpuprof_gpu_temperature_celsius";
inline constexpr char kGpuPower[] = "gpuprof_gpu_power_watts";
inline constexpr char kGpuThrottleReason[] = "gpuprof_gpu_throttle_reason_active";

// GPU health (NVML Xid events and memory error counters).
inline constexpr char kGpuHealthy[] = "gpuprof_gpu_healthy";
inline constexpr char kGpuXidEvents[] = "gpuprof_gpu_xid_events_total";
inline constexpr char kGpuMemoryErrors[] = "gpuprof_gpu_memory_errors";

inline constexpr const char* kAll[] = {
    kUp,
    kBuildInfo,
    kExperiments,
    kQueuedExperiments,
    kOldestQueuedExperimentAge,
    kExperimentQueueSeconds,
    kExperimentRunSeconds,
    kGpus,
    kGpuInfo,
    kGpuLeased,
    kGpuLeaseInfo,
    kExperimentStartTimestamp,
    kExperimentEndTimestamp,
    kExperimentHeadline,
    kSweepStartTimestamp,
    kSweepEndTimestamp,
    kResultHeadline,
    kWorkerFailures,
    kGrpcRequests,
    kStoreSizeBytes,
    kStoreDamagedRows,
    kStoreDiskFreeBytes,
    kStoreReadOnly,
    kAccessRefusals,
    kPreemptions,
    kSubmitPhaseSeconds,
    kStoreCommitPhaseSeconds,
    kStoreCommitBatchWrites,
    kConnections,
    kConnectionsRefused,
    kUserQueuedExperiments,
    kUserGpusInUse,
    kUserGpuHoursLastDay,
    kResultBandwidth,
    kResultCopyBandwidthRatio,
    kResultCollectiveBusBandwidth,
    kResultAttentionFlops,
    kResultRadixHitRatio,
    kResultRadixOperations,
    kNvmlAvailable,
    kGpuUtilization,
    kGpuMemoryControllerUtilization,
    kGpuMemoryUsed,
    kGpuMemoryTotal,
    kGpuSmClock,
    kGpuTemperature,
    kGpuPower,
    kGpuThrottleReason,
    kGpuHealthy,
    kGpuXidEvents,
    kGpuMemoryErrors,
};

}  // namespace gpuprof::daemon::metric_names

#endif  // GPUPROF_DAEMON_METRICS_METRIC_NAMES_H_
