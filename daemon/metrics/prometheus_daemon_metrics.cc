#include "daemon/metrics/prometheus_daemon_metrics.h"

#include "daemon/gpu_health/gpu_faults.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <exception>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "daemon/admission/access_policy.h"
#include "daemon/metrics/latency_phases.h"
#include "daemon/metrics/metric_names.h"
#include "gpuprof/v1/workloads.pb.h"
#include "prometheus/text_serializer.h"
#include "workloads/spec_table.h"

namespace gpuprof::daemon {
namespace {

using prometheus::Labels;

// Queue waits range from immediate to hours behind a long sweep.
const prometheus::Histogram::BucketBoundaries& QueueSecondsBuckets() {
  static const auto* const kBuckets = new prometheus::Histogram::BucketBoundaries{
      0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 14400};
  return *kBuckets;
}

// Runs range from a tenth of a second (small radix runs) to the 24 h timeout limit.
const prometheus::Histogram::BucketBoundaries& RunSecondsBuckets() {
  static const auto* const kBuckets = new prometheus::Histogram::BucketBoundaries{
      0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600, 14400, 86400};
  return *kBuckets;
}

// NVML's clocks-event-reason bits (nvmlClocksEventReason*), decoded so that each reason is a
// series of its own: a bit mask cannot be graphed or alerted on.
struct ThrottleReason {
  uint64_t bit;
  const char* label;
};
constexpr ThrottleReason kThrottleReasons[] = {
    {0x1, "gpu_idle"},
    {0x2, "applications_clocks_setting"},
    {0x4, "sw_power_cap"},
    {0x8, "hw_slowdown"},
    {0x10, "sync_boost"},
    {0x20, "sw_thermal_slowdown"},
    {0x40, "hw_thermal_slowdown"},
    {0x80, "hw_power_brake_slowdown"},
    {0x100, "display_clock_setting"},
};

constexpr v1::ExperimentState kFinalStates[] = {v1::FINISHED, v1::FAILED, v1::CANCELLED,
                                                v1::TIMED_OUT, v1::INTERRUPTED};

// "WORKLOAD_RADIX" -> "radix": the enum names without their prefix, in lower case.
std::string EnumLabel(const std::string& enum_name, absl::string_view prefix) {
  return absl::AsciiStrToLower(absl::StripPrefix(enum_name, prefix));
}

std::string WorkloadLabel(v1::Workload workload) {
  return EnumLabel(v1::Workload_Name(workload), "WORKLOAD_");
}

std::string StateLabel(v1::ExperimentState state) {
  return absl::AsciiStrToLower(v1::ExperimentState_Name(state));
}

std::string GrpcCodeLabel(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      // Out-of-range codes share one label so that the label set stays bounded.
      return "INVALID_CODE";
  }
}

double Seconds(const google::protobuf::Timestamp& timestamp) {
  return static_cast<double>(timestamp.seconds()) + timestamp.nanos() * 1e-9;
}

// A headline's figure in Prometheus' base units, and the unit's name.
struct BaseUnitFigure {
  double value;
  std::string unit;
};
BaseUnitFigure InBaseUnits(const workloads::Headline& headline) {
  if (headline.unit == "GB/s") return {headline.value * 1e9, "bytes_per_second"};
  if (headline.unit == "TFLOP/s") return {headline.value * 1e12, "flops_per_second"};
  if (headline.unit == "op/s") return {headline.value, "operations_per_second"};
  if (headline.unit == "us") return {headline.value * 1e-6, "seconds"};
  return {headline.value, absl::AsciiStrToLower(headline.unit)};
}

// Buckets of the headline histogram for each base unit: from the slowest figure a small run
// gives to past what a GPU or a CPU core reaches, 1-2-5 per decade.
prometheus::Histogram::BucketBoundaries DecadeBuckets(int from_exponent, int to_exponent) {
  prometheus::Histogram::BucketBoundaries buckets;
  for (int exponent = from_exponent; exponent <= to_exponent; ++exponent) {
    for (double step : {1.0, 2.0, 5.0}) buckets.push_back(step * std::pow(10.0, exponent));
  }
  return buckets;
}
const prometheus::Histogram::BucketBoundaries& HeadlineBuckets(const std::string& unit) {
  static const auto* const kBytes =
      new prometheus::Histogram::BucketBoundaries(DecadeBuckets(8, 13));  // 100 MB/s .. 50 TB/s
  static const auto* const kFlops = new prometheus::Histogram::BucketBoundaries(
      DecadeBuckets(10, 15));  // 10 GFLOP/s .. 5 PFLOP/s
  static const auto* const kOperations =
      new prometheus::Histogram::BucketBoundaries(DecadeBuckets(2, 9));  // 100 op/s .. 5 Gop/s
  static const auto* const kSeconds =
      new prometheus::Histogram::BucketBoundaries(DecadeBuckets(-7, 0));  // 0.1 us .. 5 s
  if (unit == "bytes_per_second") return *kBytes;
  if (unit == "flops_per_second") return *kFlops;
  if (unit == "seconds") return *kSeconds;
  return *kOperations;
}

// 812.3 -> "812.3", 1454616 -> "1.455M": four significant digits, as a person reads them.
std::string ShortNumber(double value) {
  constexpr std::pair<double, const char*> kPrefixes[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}};
  for (const auto& [scale, prefix] : kPrefixes) {
    if (std::abs(value) >= scale) return absl::StrFormat("%.4g%s", value / scale, prefix);
  }
  return absl::StrFormat("%.4g", value);
}

// The headline as the annotation's text: "decode 812.3 GB/s (95.1% of copy)",
// "1.455M match op/s".
std::string HeadlineText(const workloads::Headline& headline) {
  std::string text = headline.phase.empty() ? "" : absl::StrCat(headline.phase, " ");
  if (headline.bound == workloads::HeadlineBound::kCpuRate) {
    absl::StrAppend(&text, ShortNumber(headline.value), " ",
                    absl::StripSuffix(headline.name, "_ops"), " ", headline.unit);
  } else if (headline.name == "busbw" || headline.name == "algbw") {
    absl::StrAppend(&text, headline.name, " ", ShortNumber(headline.value), " ", headline.unit);
  } else {
    absl::StrAppend(&text, ShortNumber(headline.value), " ", headline.unit);
  }
  if (headline.pct_of_bound > 0 && !headline.bound_reference.empty()) {
    absl::StrAppend(
        &text, absl::StrFormat(" (%.1f%% of %s)", headline.pct_of_bound, headline.bound_reference));
  }
  return text;
}

// At most `max_bytes` of `text`'s first line, cut on a UTF-8 character boundary.
std::string ShortLabel(absl::string_view text, size_t max_bytes = 120) {
  text = text.substr(0, text.find('\n'));
  if (text.size() <= max_bytes) return std::string(text);
  size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return absl::StrCat(text.substr(0, end), "...");
}

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

std::string GpuList(const google::protobuf::RepeatedField<int32_t>& gpus) {
  return absl::StrJoin(gpus, ",");
}

// What identifies an experiment in its run series: id, user, workload, and its sweep's id
// and point index when it is a point of one.
Labels RunLabels(const v1::Experiment& experiment) {
  Labels labels = {{"experiment", experiment.id()},
                   {"user", experiment.user()},
                   {"workload", WorkloadLabel(experiment.workload())}};
  if (!experiment.sweep_id().empty()) {
    labels["sweep"] = experiment.sweep_id();
    labels["point"] = absl::StrCat(experiment.sweep_point());
  }
  return labels;
}

std::string SweepWorkloadLabel(const v1::Sweep& sweep) {
  const workloads::WorkloadSpec* spec =
      workloads::FindWorkloadSpec(sweep.request().base().workload_case());
  return spec == nullptr ? "unspecified" : WorkloadLabel(spec->workload);
}

std::string SweepStateLabel(v1::SweepState state) {
  return EnumLabel(v1::SweepState_Name(state), "SWEEP_");
}

// Sets the series for `labels` when there is a value, and drops it when there is none, so
// that a reading NVML stopped returning does not linger as a stale value.
void SetOrRemove(prometheus::Family<prometheus::Gauge>& family, const Labels& labels,
                 const std::optional<double>& value) {
  if (value.has_value()) {
    family.Add(labels).Set(*value);
  } else if (family.Has(labels)) {
    family.Remove(&family.Add(labels));
  }
}

}  // namespace

PrometheusDaemonMetrics::PrometheusDaemonMetrics(absl::string_view version,
                                                 RecentSeriesLimits recent, std::string hostname)
    : registry_(std::make_shared<prometheus::Registry>()),
      up_(prometheus::BuildGauge()
              .Name(metric_names::kUp)
              .Help("1 while gpuprofd serves, 0 once it is shutting down.")
              .Register(*registry_)
              .Add({})),
      build_info_(prometheus::BuildGauge()
                      .Name(metric_names::kBuildInfo)
                      .Help("Always 1; the version label says which gpuprofd runs.")
                      .Register(*registry_)),
      experiments_(prometheus::BuildCounter()
                       .Name(metric_names::kExperiments)
                       .Help("Experiments that reached a final state, by workload and state.")
                       .Register(*registry_)),
      queued_experiments_(prometheus::BuildGauge()
                              .Name(metric_names::kQueuedExperiments)
                              .Help("Experiments waiting in the queue for GPUs or a CPU slot.")
                              .Register(*registry_)
                              .Add({})),
      queue_seconds_(prometheus::BuildHistogram()
                         .Name(metric_names::kExperimentQueueSeconds)
                         .Help("Time from submission to start, of experiments that started.")
                         .Register(*registry_)),
      run_seconds_(prometheus::BuildHistogram()
                       .Name(metric_names::kExperimentRunSeconds)
                       .Help("Time from start to final state, of experiments that started.")
                       .Register(*registry_)),
      gpus_(prometheus::BuildGauge()
                .Name(metric_names::kGpus)
                .Help("GPUs this daemon owns (0 on a machine without GPUs).")
                .Register(*registry_)
                .Add({})),
      gpu_info_(prometheus::BuildGauge()
                    .Name(metric_names::kGpuInfo)
                    .Help("Always 1, one series per GPU: its model name and UUID.")
                    .Register(*registry_)),
      gpu_leased_(prometheus::BuildGauge()
                      .Name(metric_names::kGpuLeased)
                      .Help("1 while the GPU is leased to a running experiment, else 0.")
                      .Register(*registry_)),
      gpu_lease_info_(prometheus::BuildGauge()
                          .Name(metric_names::kGpuLeaseInfo)
                          .Help("Always 1, one series per leased GPU: the experiment holding "
                                "it, its user and workload, and the GPU's UUID, modelName and "
                                "Hostname as dcgm-exporter labels them.")
                          .Register(*registry_)),
      oldest_queued_age_(prometheus::BuildGauge()
                             .Name(metric_names::kOldestQueuedExperimentAge)
                             .Help("How long the first submitted experiment still queued has "
                                   "waited since its submission; 0 when none is queued.")
                             .Register(*registry_)
                             .Add({})),
      worker_failures_(prometheus::BuildCounter()
                           .Name(metric_names::kWorkerFailures)
                           .Help("Worker processes that crashed (reason=crash) or were killed "
                                 "at the experiment's timeout (reason=timeout).")
                           .Register(*registry_)),
      grpc_requests_(prometheus::BuildCounter()
                         .Name(metric_names::kGrpcRequests)
                         .Help("Finished gpuprof.v1.Profiler RPCs, by method and status code.")
                         .Register(*registry_)),
      access_refusals_(prometheus::BuildCounter()
                           .Name(metric_names::kAccessRefusals)
                           .Help("Requests refused by the access policy, by reason: "
                                 "on-behalf-of, not-owner, custom-kernel, quota:<quota name>. "
                                 "(Callers that "
                                 "could not be identified show as grpc_requests_total with "
                                 "code UNAUTHENTICATED.)")
                           .Register(*registry_)),
      preemptions_(prometheus::BuildCounter()
                       .Name(metric_names::kPreemptions)
                       .Help("Running experiments stopped for a higher-priority one and queued "
                             "again.")
                       .Register(*registry_)
                       .Add({})),
      connections_(prometheus::BuildGauge()
                       .Name(metric_names::kConnections)
                       .Help("Client connections open (unix socket and TCP), counted against "
                             "--max_connections.")
                       .Register(*registry_)
                       .Add({})),
      connections_refused_(prometheus::BuildCounter()
                               .Name(metric_names::kConnectionsRefused)
                               .Help("Client connections closed at accept because "
                                     "--max_connections were open.")
                               .Register(*registry_)
                               .Add({})),
      user_queued_(prometheus::BuildGauge()
                       .Name(metric_names::kUserQueuedExperiments)
                       .Help("QUEUED experiments per user (users named in the access policy; "
                             "everyone else as user=\"other\").")
                       .Register(*registry_)),
      user_gpus_(prometheus::BuildGauge()
                     .Name(metric_names::kUserGpusInUse)
                     .Help("GPUs held by running experiments per user (policy users, "
                           "\"other\").")
                     .Register(*registry_)),
      user_gpu_hours_(prometheus::BuildGauge()
                          .Name(metric_names::kUserGpuHoursLastDay)
                          .Help("GPU-hours used over the last 24 hours per user named in the "
                                "access policy (the max_gpu_hours_per_day quota's measure).")
                          .Register(*registry_)),
      store_size_bytes_(prometheus::BuildGauge()
                            .Name(metric_names::kStoreSizeBytes)
                            .Help("Size of the SQLite experiment store.")
                            .Register(*registry_)
                            .Add({})),
      store_damaged_rows_(prometheus::BuildGauge()
                              .Name(metric_names::kStoreDamagedRows)
                              .Help("Rows of the experiment store whose stored message does not "
                                    "parse, skipped by start-up and listings since gpuprofd "
                                    "started (run gpuprofd --check-db).")
                              .Register(*registry_)
                              .Add({})),
      store_disk_free_bytes_(prometheus::BuildGauge()
                                 .Name(metric_names::kStoreDiskFreeBytes)
                                 .Help("Bytes free on the file system holding the experiment "
                                       "store (statvfs f_bavail * f_frsize).")
                                 .Register(*registry_)
                                 .Add({})),
      store_read_only_(prometheus::BuildGauge()
                           .Name(metric_names::kStoreReadOnly)
                           .Help("1 while the disk holding the experiment store is full and "
                                 "gpuprofd serves reads only, refusing writes; else 0.")
                           .Register(*registry_)
                           .Add({})),
      result_bandwidth_(prometheus::BuildGauge()
                            .Name(metric_names::kResultBandwidth)
                            .Help("Bandwidth achieved by the latest finished experiment of the "
                                  "workload on the GPU (bytes read + written per second); "
                                  "kernel=\"custom\" for a submitter's own kernel.")
                            .Register(*registry_)),
      result_copy_bandwidth_ratio_(
          prometheus::BuildGauge()
              .Name(metric_names::kResultCopyBandwidthRatio)
              .Help("Latest achieved bandwidth over the copy bandwidth measured on the GPU "
                    "(0..1, the practical limit).")
              .Register(*registry_)),
      result_collective_bus_bandwidth_(
          prometheus::BuildGauge()
              .Name(metric_names::kResultCollectiveBusBandwidth)
              .Help("Bus bandwidth (nccl-tests convention) of the latest collective, by "
                    "collective and tensor-parallel degree.")
              .Register(*registry_)),
      result_attention_flops_(prometheus::BuildGauge()
                                  .Name(metric_names::kResultAttentionFlops)
                                  .Help("FLOP/s of the latest attention experiment, by phase "
                                        "and GPU.")
                                  .Register(*registry_)),
      result_radix_hit_ratio_(prometheus::BuildGauge()
                                  .Name(metric_names::kResultRadixHitRatio)
                                  .Help("Matched over requested tokens in the latest radix "
                                        "experiment (0..1).")
                                  .Register(*registry_)),
      result_radix_operations_(prometheus::BuildGauge()
                                   .Name(metric_names::kResultRadixOperations)
                                   .Help("Operations per second of the latest radix "
                                         "experiment, by operation.")
                                   .Register(*registry_)),
      result_headline_(prometheus::BuildHistogram()
                           .Name(metric_names::kResultHeadline)
                           .Help("Headline figure of every finished experiment, in the base "
                                 "unit the unit label names, by workload, phase and figure.")
                           .Register(*registry_)),
      recent_(std::make_shared<RecentSeries>(recent)),
      experiment_start_(
          recent_->AddFamily(metric_names::kExperimentStartTimestamp,
                             "When the experiment started (Unix seconds); kept for the "
                             "retention window after it ended.")),
      experiment_end_(
          recent_->AddFamily(metric_names::kExperimentEndTimestamp,
                             "When the experiment ended (Unix seconds), with its final state "
                             "and headline; kept for the retention window.")),
      experiment_headline_(
          recent_->AddFamily(metric_names::kExperimentHeadline,
                             "The finished experiment's headline figure in the base "
                             "unit the unit label names; kept for the retention "
                             "window, one series per experiment and sweep point.")),
      sweep_start_(recent_->AddFamily(metric_names::kSweepStartTimestamp,
                                      "When the sweep was submitted (Unix seconds); kept for the "
                                      "retention window after it ended.")),
      sweep_end_(
          recent_->AddFamily(metric_names::kSweepEndTimestamp,
                             "When the sweep's last point ended (Unix seconds), with its final "
                             "state and best headline; kept for the retention window.")),
      nvml_available_(prometheus::BuildGauge()
                          .Name(metric_names::kNvmlAvailable)
                          .Help("1 when GPU telemetry is read through NVML, 0 when NVML is "
                                "absent (no driver) or there are no GPUs.")
                          .Register(*registry_)
                          .Add({})),
      gpu_utilization_(prometheus::BuildGauge()
                           .Name(metric_names::kGpuUtilization)
                           .Help("Fraction of the last sample period in which a kernel ran on "
                                 "the GPU (NVML).")
                           .Register(*registry_)),
      gpu_memory_controller_utilization_(
          prometheus::BuildGauge()
              .Name(metric_names::kGpuMemoryControllerUtilization)
              .Help("Fraction of the last sample period in which device memory was read or "
                    "written (NVML).")
              .Register(*registry_)),
      gpu_memory_used_(prometheus::BuildGauge()
                           .Name(metric_names::kGpuMemoryUsed)
                           .Help("Device memory in use (NVML).")
                           .Register(*registry_)),
      gpu_memory_total_(prometheus::BuildGauge()
                            .Name(metric_names::kGpuMemoryTotal)
                            .Help("Device memory in total (NVML).")
                            .Register(*registry_)),
      gpu_sm_clock_(prometheus::BuildGauge()
                        .Name(metric_names::kGpuSmClock)
                        .Help("Current SM clock (NVML).")
                        .Register(*registry_)),
      gpu_temperature_(prometheus::BuildGauge()
                           .Name(metric_names::kGpuTemperature)
                           .Help("GPU die temperature (NVML).")
                           .Register(*registry_)),
      gpu_power_(prometheus::BuildGauge()
                     .Name(metric_names::kGpuPower)
                     .Help("Power drawn by the GPU board (NVML).")
                     .Register(*registry_)),
      gpu_throttle_reason_(prometheus::BuildGauge()
                               .Name(metric_names::kGpuThrottleReason)
                               .Help("1 while the reason holds the GPU's clocks below their "
                                     "maximum (NVML clocks event reasons), else 0.")
                               .Register(*registry_)),
      gpu_healthy_(prometheus::BuildGauge()
                       .Name(metric_names::kGpuHealthy)
                       .Help("1 while the GPU is healthy, 0 while it is drained by a hardware "
                             "fault until an admin clears it; no series when its health is "
                             "not watched (no NVML).")
                       .Register(*registry_)),
      gpu_xid_events_(prometheus::BuildCounter()
                          .Name(metric_names::kGpuXidEvents)
                          .Help("Xid events the driver reported, by GPU and class "
                                "(application, hardware, other).")
                          .Register(*registry_)),
      gpu_memory_errors_(prometheus::BuildGauge()
                             .Name(metric_names::kGpuMemoryErrors)
                             .Help("Memory error counters as NVML reports them, by kind: "
                                   "volatile ECC errors (ecc_corrected, ecc_uncorrected), "
                                   "retired pages (retired_single_bit, retired_double_bit), "
                                   "remapped rows (remapped_correctable, "
                                   "remapped_uncorrectable).")
                             .Register(*registry_)),
      hostname_(hostname.empty() ? HostName() : std::move(hostname)) {
  up_.Set(1);
  build_info_.Add({{"version", std::string(version)}}).Set(1);
  // Every bounded combination starts at zero, so that rate() and increase() see the first
  // event instead of a series that appears with it.
  for (const workloads::WorkloadSpec* spec : workloads::WorkloadSpecs()) {
    const std::string workload_label = WorkloadLabel(spec->workload);
    for (v1::ExperimentState state : kFinalStates) {
      experiments_.Add({{"workload", workload_label}, {"state", StateLabel(state)}});
    }
    queue_seconds_.Add({{"workload", workload_label}}, QueueSecondsBuckets());
    run_seconds_.Add({{"workload", workload_label}}, RunSecondsBuckets());
  }
  worker_failures_.Add({{"reason", "crash"}});
  worker_failures_.Add({{"reason", "timeout"}});
}

PrometheusDaemonMetrics::~PrometheusDaemonMetrics() {
  // Stop serving before the families go away.
  absl::MutexLock lock(&mutex_);
  exposer_.reset();
}

absl::Status PrometheusDaemonMetrics::Serve(const std::string& address) {
  absl::MutexLock lock(&mutex_);
  if (exposer_ != nullptr) return absl::FailedPreconditionError("metrics already served");
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/2);
  } catch (const std::exception& error) {
    // CivetWeb reports a failed bind by throwing.
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", error.what()));
  }
  for (const auto& collectable : Collectables()) exposer_->RegisterCollectable(collectable);
  return absl::OkStatus();
}

int PrometheusDaemonMetrics::port() const {
  absl::MutexLock lock(&mutex_);
  if (exposer_ == nullptr) return 0;
  const std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

std::vector<std::shared_ptr<prometheus::Collectable>> PrometheusDaemonMetrics::Collectables()
    const {
  return {registry_, LatencyPhaseRegistry(), recent_};
}

std::string PrometheusDaemonMetrics::ExpositionText() const {
  std::vector<prometheus::MetricFamily> families;
  for (const auto& collectable : Collectables()) {
    for (prometheus::MetricFamily& family : collectable->Collect()) {
      families.push_back(std::move(family));
    }
  }
  return prometheus::TextSerializer().Serialize(families);
}

void PrometheusDaemonMetrics::SetUp(bool up) { up_.Set(up ? 1 : 0); }

void PrometheusDaemonMetrics::ExperimentEnded(const v1::Experiment& experiment) {
  const std::string workload = WorkloadLabel(experiment.workload());
  experiments_.Add({{"workload", workload}, {"state", StateLabel(experiment.state())}}).Increment();
  // An experiment cancelled while queued never started: it has no queue or run time.
  if (experiment.has_started()) {
    const double started = Seconds(experiment.started());
    queue_seconds_.Add({{"workload", workload}}, QueueSecondsBuckets())
        .Observe(std::max(0.0, started - Seconds(experiment.created())));
    if (experiment.has_finished()) {
      run_seconds_.Add({{"workload", workload}}, RunSecondsBuckets())
          .Observe(std::max(0.0, Seconds(experiment.finished()) - started));
    }
  }
  if (experiment.state() == v1::FINISHED && experiment.has_result()) RecordResult(experiment);
  RecordRun(experiment);
  absl::MutexLock lock(&mutex_);
  running_.erase(experiment.id());
  for (int gpu : experiment.gpu_ids()) {
    const auto lease = leases_.find(gpu);
    if (lease != leases_.end() && lease->second.first == experiment.id()) SetLeaseLocked(gpu, "");
  }
}

void PrometheusDaemonMetrics::ExperimentStarted(const v1::Experiment& experiment) {
  if (experiment.has_started()) {
    Labels labels = RunLabels(experiment);
    labels["gpus"] = GpuList(experiment.gpu_ids());
    recent_->Set(experiment.id(), experiment_start_, std::move(labels),
                 Seconds(experiment.started()));
  }
  absl::MutexLock lock(&mutex_);
  running_[experiment.id()] = {experiment.user(), WorkloadLabel(experiment.workload())};
  for (int gpu : experiment.gpu_ids()) SetLeaseLocked(gpu, experiment.id());
}

// The run series of an experiment that ended: its end (the annotation) and, when it finished
// with a headline, the figure; and its sweep's best figure so far.
void PrometheusDaemonMetrics::RecordRun(const v1::Experiment& experiment) {
  const std::optional<workloads::Headline> headline =
      experiment.state() == v1::FINISHED && experiment.has_result()
          ? workloads::HeadlineOf(experiment)
          : std::nullopt;
  if (headline.has_value() && !experiment.sweep_id().empty()) {
    absl::MutexLock lock(&mutex_);
    // Bounded by the sweeps running: SweepEnded takes a sweep's entry away. One that never
    // ends here (the daemon stopped) is dropped once many are held.
    if (sweep_best_.size() >= 1000 && !sweep_best_.contains(experiment.sweep_id())) {
      sweep_best_.erase(sweep_best_.begin());
    }
    auto [best, first] = sweep_best_.try_emplace(experiment.sweep_id());
    const bool better = headline->higher_is_better ? headline->value > best->second.value
                                                   : headline->value < best->second.value;
    if (first || better) {
      best->second = {headline->value, headline->higher_is_better, HeadlineText(*headline),
                      experiment.sweep_point()};
    }
  }
  if (!recent_->enabled()) return;
  const double ended = experiment.has_finished()
                           ? Seconds(experiment.finished())
                           : absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  Labels labels = RunLabels(experiment);
  labels["gpus"] = GpuList(experiment.gpu_ids());
  labels["state"] = StateLabel(experiment.state());
  labels["headline"] = headline.has_value()          ? HeadlineText(*headline)
                       : experiment.reason().empty() ? ""
                                                     : ShortLabel(experiment.reason());
  recent_->Set(experiment.id(), experiment_end_, std::move(labels), ended);
  if (headline.has_value()) {
    const BaseUnitFigure figure = InBaseUnits(*headline);
    Labels figure_labels = RunLabels(experiment);
    figure_labels["figure"] = headline->name;
    figure_labels["unit"] = figure.unit;
    if (!headline->phase.empty()) figure_labels["phase"] = headline->phase;
    if (experiment.request().has_custom_kernel()) figure_labels["kernel"] = "custom";
    recent_->Set(experiment.id(), experiment_headline_, std::move(figure_labels), figure.value);
  }
  recent_->Ended(experiment.id(), absl::Now());
}

void PrometheusDaemonMetrics::SweepStarted(const v1::Sweep& sweep) {
  recent_->Set(sweep.id(), sweep_start_,
               {{"sweep", sweep.id()},
                {"user", sweep.user()},
                {"workload", SweepWorkloadLabel(sweep)},
                {"points", absl::StrCat(sweep.points_total())}},
               Seconds(sweep.created()));
}

void PrometheusDaemonMetrics::SweepEnded(const v1::Sweep& sweep) {
  std::string headline =
      absl::StrCat(sweep.points_finished(), " of ", sweep.points_total(), " points finished");
  {
    absl::MutexLock lock(&mutex_);
    const auto best = sweep_best_.find(sweep.id());
    if (best != sweep_best_.end()) {
      absl::StrAppend(&headline, "; best ", best->second.text, " (point ", best->second.point, ")");
      sweep_best_.erase(best);
    }
  }
  recent_->Set(sweep.id(), sweep_end_,
               {{"sweep", sweep.id()},
                {"user", sweep.user()},
                {"workload", SweepWorkloadLabel(sweep)},
                {"points", absl::StrCat(sweep.points_total())},
                {"state", SweepStateLabel(sweep.state())},
                {"headline", ShortLabel(headline, 200)}},
               sweep.has_finished() ? Seconds(sweep.finished())
                                    : absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  recent_->Ended(sweep.id(), absl::Now());
}

void PrometheusDaemonMetrics::RecordResult(const v1::Experiment& experiment) {
  const v1::ExperimentResult& result = experiment.result();
  const std::string workload = WorkloadLabel(experiment.workload());
  const v1::GpuMeasurement& measurement = result.measurement();
  // Attention's phase (its headline's): prefill and decode are different figures, never one
  // series that alternates between them.
  const std::optional<workloads::Headline> headline = workloads::HeadlineOf(experiment);
  const std::string phase = headline.has_value() ? headline->phase : "";
  // A submitter's own kernel is a series of its own (kernel="custom"), beside ours (no kernel
  // label), so that neither overwrites the other's latest figure.
  const bool custom_kernel = experiment.request().has_custom_kernel();
  if (headline.has_value()) {
    const BaseUnitFigure figure = InBaseUnits(*headline);
    Labels labels = {{"workload", workload}, {"figure", headline->name}, {"unit", figure.unit}};
    if (!phase.empty()) labels["phase"] = phase;
    if (custom_kernel) labels["kernel"] = "custom";
    result_headline_.Add(labels, HeadlineBuckets(figure.unit)).Observe(figure.value);
  }
  for (int gpu : experiment.gpu_ids()) {
    Labels labels = {{"workload", workload}, {"gpu", absl::StrCat(gpu)}};
    if (!phase.empty()) labels["phase"] = phase;
    if (custom_kernel) labels["kernel"] = "custom";
    if (measurement.bandwidth_gbps() > 0) {
      result_bandwidth_.Add(labels).Set(measurement.bandwidth_gbps() * 1e9);
    }
    if (measurement.pct_of_measured_copy_bandwidth() > 0) {
      result_copy_bandwidth_ratio_.Add(labels).Set(measurement.pct_of_measured_copy_bandwidth() /
                                                   100.0);
    }
    if (experiment.request().has_attention() && measurement.tflops() > 0) {
      Labels flops_labels = {
          {"phase", phase.empty() ? EnumLabel(v1::AttentionPhase_Name(
                                                  experiment.request().attention().phase()),
                                              "ATTENTION_PHASE_")
                                  : phase},
          {"gpu", absl::StrCat(gpu)}};
      if (custom_kernel) flops_labels["kernel"] = "custom";
      result_attention_flops_.Add(flops_labels).Set(measurement.tflops() * 1e12);
    }
  }
  if (experiment.request().has_collective() && result.collective().busbw_gbps() > 0) {
    const std::string collective =
        EnumLabel(v1::CollectiveOp_Name(experiment.request().collective().op()), "COLLECTIVE_OP_");
    // Without an explicit TP degree the collective spans every leased GPU.
    const int tp_degree = experiment.request().tp_degree() > 0 ? experiment.request().tp_degree()
                                                               : result.collective().ranks();
    result_collective_bus_bandwidth_
        .Add({{"collective", collective}, {"tp_degree", absl::StrCat(tp_degree)}})
        .Set(result.collective().busbw_gbps() * 1e9);
  }
  if (result.has_radix()) {
    result_radix_hit_ratio_.Add({}).Set(result.radix().hit_rate());
    for (const v1::OperationStats& operation : result.radix().operations()) {
      result_radix_operations_.Add({{"operation", operation.operation()}})
          .Set(operation.ops_per_second());
    }
  }
}

void PrometheusDaemonMetrics::WorkerFailed(bool timed_out) {
  worker_failures_.Add({{"reason", timed_out ? "timeout" : "crash"}}).Increment();
}

void PrometheusDaemonMetrics::Refused(const std::string& reason) {
  // The reasons are a fixed set chosen by the daemon, never user input.
  access_refusals_.Add({{"reason", reason}}).Increment();
}

void PrometheusDaemonMetrics::SetUserQuotaUse(const std::vector<v1::QuotaReport>& use) {
  absl::MutexLock lock(&quota_mutex_);
  std::set<std::string> users;
  for (const v1::QuotaReport& report : use) {
    const Labels labels = {{"user", report.user()}};
    users.insert(report.user());
    user_queued_.Add(labels).Set(report.queued_experiments());
    user_gpus_.Add(labels).Set(report.running_gpus());
    if (report.user() != kOtherUsers) {
      user_gpu_hours_.Add(labels).Set(report.gpu_hours_last_day());
    }
  }
  for (const std::string& gone : quota_users_) {
    if (users.contains(gone)) continue;
    const Labels labels = {{"user", gone}};
    for (auto* family : {&user_queued_, &user_gpus_, &user_gpu_hours_}) {
      if (family->Has(labels)) family->Remove(&family->Add(labels));
    }
  }
  quota_users_ = std::move(users);
}

void PrometheusDaemonMetrics::Preempted() { preemptions_.Increment(); }

void PrometheusDaemonMetrics::SetConnections(int64_t live, int64_t refused_total) {
  connections_.Set(static_cast<double>(live));
  // The limit keeps a running total; the counter takes what is new since the last sample.
  absl::MutexLock lock(&connections_mutex_);
  if (refused_total > connections_refused_reported_) {
    connections_refused_.Increment(
        static_cast<double>(refused_total - connections_refused_reported_));
    connections_refused_reported_ = refused_total;
  }
}

void PrometheusDaemonMetrics::GpuXid(int gpu, v1::GpuFaultClass fault_class) {
  gpu_xid_events_.Add({{"gpu", absl::StrCat(gpu)}, {"class", FaultClassLabel(fault_class)}})
      .Increment();
}

void PrometheusDaemonMetrics::SetGpuHealth(const v1::ListGpusResponse& gpus) {
  for (const v1::GpuInfo& info : gpus.gpus()) {
    const std::string gpu = absl::StrCat(info.index());
    const Labels labels = {{"gpu", gpu}};
    SetOrRemove(gpu_healthy_, labels,
                info.health() == v1::GPU_HEALTH_UNSPECIFIED
                    ? std::nullopt
                    : std::optional<double>(info.health() == v1::GPU_HEALTH_HEALTHY ? 1 : 0));
    // The Xid counter starts at zero for every class once a GPU is watched, so that
    // increase() sees the first event.
    if (info.health() != v1::GPU_HEALTH_UNSPECIFIED) {
      for (auto fault_class : {v1::GPU_FAULT_CLASS_APPLICATION, v1::GPU_FAULT_CLASS_HARDWARE,
                               v1::GPU_FAULT_CLASS_OTHER}) {
        gpu_xid_events_.Add({{"gpu", gpu}, {"class", FaultClassLabel(fault_class)}});
      }
    }
    const v1::GpuMemoryErrors& errors = info.memory_errors();
    const bool read = info.has_memory_errors();
    const std::pair<const char*, int64_t> counters[] = {
        {"ecc_corrected", errors.ecc_corrected()},
        {"ecc_uncorrected", errors.ecc_uncorrected()},
        {"retired_single_bit", errors.retired_pages_single_bit()},
        {"retired_double_bit", errors.retired_pages_double_bit()},
        {"remapped_correctable", errors.remapped_rows_correctable()},
        {"remapped_uncorrectable", errors.remapped_rows_uncorrectable()},
    };
    for (const auto& [kind, value] : counters) {
      SetOrRemove(
          gpu_memory_errors_, {{"gpu", gpu}, {"kind", kind}},
          read && value >= 0 ? std::optional<double>(static_cast<double>(value)) : std::nullopt);
    }
  }
}

void PrometheusDaemonMetrics::RpcFinished(absl::string_view method, grpc::StatusCode code) {
  grpc_requests_.Add({{"method", std::string(method)}, {"code", GrpcCodeLabel(code)}}).Increment();
}

void PrometheusDaemonMetrics::SetGpuInventory(const v1::ListGpusResponse& inventory) {
  absl::MutexLock lock(&mutex_);
  gpu_indices_.clear();
  for (const v1::GpuInfo& gpu : inventory.gpus()) {
    const std::string index = absl::StrCat(gpu.index());
    gpu_indices_.push_back(gpu.index());
    // dcgm-exporter's label names beside ours, so that `on(UUID)` joins the two.
    const Labels dcgm = {
        {"gpu", index}, {"UUID", gpu.uuid()}, {"modelName", gpu.name()}, {"Hostname", hostname_}};
    gpu_labels_[gpu.index()] = dcgm;
    Labels info = dcgm;
    info["name"] = gpu.name();
    info["uuid"] = gpu.uuid();
    gpu_info_.Add(info).Set(1);
    gpu_leased_.Add({{"gpu", index}}).Set(0);
  }
  gpus_.Set(static_cast<double>(inventory.gpus_size()));
}

void PrometheusDaemonMetrics::SetQueuedExperiments(int64_t count) {
  queued_experiments_.Set(static_cast<double>(count));
}

void PrometheusDaemonMetrics::SetGpuLeases(const std::map<int, std::string>& leases) {
  absl::MutexLock lock(&mutex_);
  for (int gpu : gpu_indices_) {
    const auto lease = leases.find(gpu);
    const bool leased = lease != leases.end() && !lease->second.empty();
    gpu_leased_.Add({{"gpu", absl::StrCat(gpu)}}).Set(leased ? 1 : 0);
    SetLeaseLocked(gpu, leased ? lease->second : "");
  }
}

void PrometheusDaemonMetrics::SetLeaseLocked(int gpu, const std::string& id) {
  const auto held = leases_.find(gpu);
  if (held != leases_.end()) {
    if (held->second.first == id) return;
    if (gpu_lease_info_.Has(held->second.second)) {
      gpu_lease_info_.Remove(&gpu_lease_info_.Add(held->second.second));
    }
    leases_.erase(held);
  }
  if (id.empty()) return;
  const auto known = gpu_labels_.find(gpu);
  Labels labels = known != gpu_labels_.end()
                      ? known->second
                      : Labels{{"gpu", absl::StrCat(gpu)}, {"Hostname", hostname_}};
  labels["experiment"] = id;
  // An experiment started before the metrics heard of it has no user or workload here.
  const auto running = running_.find(id);
  if (running != running_.end()) {
    labels["user"] = running->second.user;
    labels["workload"] = running->second.workload;
  }
  gpu_lease_info_.Add(labels).Set(1);
  leases_[gpu] = {id, std::move(labels)};
}

void PrometheusDaemonMetrics::SetOldestQueuedExperimentAge(absl::Duration age) {
  oldest_queued_age_.Set(std::max(0.0, absl::ToDoubleSeconds(age)));
}

void PrometheusDaemonMetrics::SetStoreSpace(int64_t free_bytes, bool read_only) {
  if (free_bytes >= 0) store_disk_free_bytes_.Set(static_cast<double>(free_bytes));
  store_read_only_.Set(read_only ? 1 : 0);
}

void PrometheusDaemonMetrics::SetStoreSizeBytes(int64_t bytes) {
  store_size_bytes_.Set(static_cast<double>(bytes));
}

void PrometheusDaemonMetrics::SetStoreDamagedRows(int64_t rows) {
  store_damaged_rows_.Set(static_cast<double>(rows));
}

void PrometheusDaemonMetrics::SetTelemetryAvailable(bool available) {
  nvml_available_.Set(available ? 1 : 0);
}

void PrometheusDaemonMetrics::SetGpuTelemetry(const GpuTelemetry& telemetry) {
  const Labels gpu = {{"gpu", absl::StrCat(telemetry.gpu)}};
  SetOrRemove(gpu_utilization_, gpu, telemetry.utilization_ratio);
  SetOrRemove(gpu_memory_controller_utilization_, gpu,
              telemetry.memory_controller_utilization_ratio);
  SetOrRemove(gpu_memory_used_, gpu, telemetry.memory_used_bytes);
  SetOrRemove(gpu_memory_total_, gpu, telemetry.memory_total_bytes);
  SetOrRemove(gpu_sm_clock_, gpu, telemetry.sm_clock_hertz);
  SetOrRemove(gpu_temperature_, gpu, telemetry.temperature_celsius);
  SetOrRemove(gpu_power_, gpu, telemetry.power_watts);
  for (const ThrottleReason& reason : kThrottleReasons) {
    std::optional<double> active;
    if (telemetry.clocks_event_reasons.has_value()) {
      active = (*telemetry.clocks_event_reasons & reason.bit) != 0 ? 1.0 : 0.0;
    }
    SetOrRemove(gpu_throttle_reason_, {{"gpu", gpu.at("gpu")}, {"reason", reason.label}}, active);
  }
}

}  // namespace gpuprof::daemon
