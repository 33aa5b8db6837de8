#include "daemon/metrics/metrics_exporter.h"

#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gpuprof::daemon {

MetricsExporter::MetricsExporter(absl::string_view version, std::string nvml_path,
                                 RecentSeriesLimits recent)
    : metrics_(version, recent), nvml_path_(std::move(nvml_path)) {}

MetricsExporter::~MetricsExporter() { Stop(); }

RpcObserver MetricsExporter::rpc_observer() {
  return [this](const std::string& method, grpc::StatusCode code) {
    metrics_.RpcFinished(method, code);
  };
}

absl::Status MetricsExporter::Start(ExperimentManager* manager, const std::string& address,
                                    absl::Duration sample_interval) {
  manager_ = manager;
  const v1::ListGpusResponse inventory = manager_->ListGpus();
  metrics_.SetGpuInventory(inventory);
  if (inventory.gpus().empty()) {
    std::fprintf(stderr, "gpuprofd: no GPUs, so no GPU telemetry metrics\n");
  } else {
    const std::vector<v1::GpuInfo> gpus(inventory.gpus().begin(), inventory.gpus().end());
    auto reader = GpuTelemetryReader::Create(gpus, nvml_path_);
    if (reader.ok()) {
      telemetry_ = *std::move(reader);
    } else {
      std::fprintf(stderr, "gpuprofd: no GPU telemetry metrics: %s\n",
                   reader.status().ToString().c_str());
    }
  }
  metrics_.SetTelemetryAvailable(telemetry_ != nullptr);
  // The first scrape must not see zeros that were never sampled.
  SampleOnce();
  if (absl::Status served = metrics_.Serve(address); !served.ok()) return served;
  std::fprintf(stderr, "gpuprofd: metrics on http://%s:%d/metrics\n",
               address.substr(0, address.rfind(':')).c_str(), metrics_.port());
  sampler_ = std::thread([this, sample_interval] { SampleLoop(sample_interval); });
  return absl::OkStatus();
}

void MetricsExporter::Stop() {
  {
    absl::MutexLock lock(&mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  metrics_.SetUp(false);
  if (sampler_.joinable()) sampler_.join();
}

void MetricsExporter::SampleOnce() {
  metrics_.SetQueuedExperiments(manager_->queued_count());
  const absl::Time now = absl::Now();
  // A failed query keeps the last value, as for the store's size below.
  if (absl::StatusOr<int64_t> oldest = manager_->store().OldestQueuedCreatedUnixNanos();
      oldest.ok()) {
    metrics_.SetOldestQueuedExperimentAge(
        *oldest < 0 ? absl::ZeroDuration() : now - absl::FromUnixNanos(*oldest));
  }
  metrics_.ExpireRecentRuns(now);
  metrics_.SetGpuLeases(manager_->GpuLeases());
  metrics_.SetGpuHealth(manager_->ListGpus());
  metrics_.SetUserQuotaUse(manager_->admission().QuotaUseForMetrics());
  if (connections_ != nullptr) {
    metrics_.SetConnections(connections_->live(), connections_->refused());
  }
  // A failed size query keeps the last value: the store's errors surface elsewhere.
  if (absl::StatusOr<int64_t> size = manager_->StoreSizeBytes(); size.ok()) {
    metrics_.SetStoreSizeBytes(*size);
  }
  metrics_.SetStoreDamagedRows(static_cast<int64_t>(manager_->DamagedStoreRows().size()));
  if (store_space_ != nullptr) {
    metrics_.SetStoreSpace(store_space_->free_bytes(), store_space_->read_only());
  }
  if (telemetry_ != nullptr) {
    for (const GpuTelemetry& sample : telemetry_->Read()) metrics_.SetGpuTelemetry(sample);
  }
}

void MetricsExporter::SampleLoop(absl::Duration interval) {
  absl::MutexLock lock(&mutex_);
  while (!stopping_) {
    const absl::Time next = absl::Now() + interval;
    while (!stopping_ && absl::Now() < next) {
      mutex_.AwaitWithDeadline(absl::Condition(&stopping_), next);
    }
    if (stopping_) break;
    // Sample without the lock, so that Stop never waits behind NVML or SQLite.
    mutex_.Unlock();
    SampleOnce();
    mutex_.Lock();
  }
}

}  // namespace gpuprof::daemon
