// What CUPTI tracing costs a memory-bound kernel of >= 20 us: a 256 MiB device-to-device copy
// (512 MiB moved per launch) timed with tracing off, with activity tracing, and inside a
// METRICS-level session (activity tracing while timing, plus a kernel-replay profiling pass
// afterwards, timed separately), side by side in one process. Modes alternate round by round
// so that clock drift affects them alike; each round times bursts of back-to-back launches
// with CUDA events. The first burst after enabling tracing is reported apart: it carries
// CUPTI's one-time set-up, which a traced experiment pays once, not per launch. Target:
// activity tracing adds <= 3% per launch.
//
// The kernel is this benchmark's own grid-stride copy (cupti/testing/copy_kernel.cu), not the
// index kernel of kernels/: that one is JIT-compiled through the worker's cache, and a plain
// copy keeps the measurement about CUPTI alone.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "common/statistics.h"
#include "cupti/activity_tracer.h"
#include "cupti/kernel_metrics.h"
#include "cupti/metric_names.h"
#include "cupti/testing/copy_kernel.h"

namespace {

using ::gpuprof::Median;

using ::gpuprof::cupti::ActivityTracer;

constexpr size_t kBytes = size_t{256} << 20;
constexpr int kLaunchesPerRound = 50;
constexpr int kRounds = 15;

#define CHECK_CUDA(call)                                                                    \
  do {                                                                                      \
    const cudaError_t error = (call);                                                       \
    if (error != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(error));            \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (false)

struct Copy {
  void* source = nullptr;
  void* destination = nullptr;
  int blocks = 0;
};

// Microseconds per launch over one burst.
double TimeBurst(const Copy& copy, cudaEvent_t start, cudaEvent_t stop) {
  CHECK_CUDA(cudaEventRecord(start));
  for (int i = 0; i < kLaunchesPerRound; ++i) {
    CHECK_CUDA(gpuprof::cupti::testing::LaunchCopyKernel(copy.source, copy.destination, kBytes,
                                                         copy.blocks, nullptr));
  }
  CHECK_CUDA(cudaEventRecord(stop));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  return 1e3 * ms / kLaunchesPerRound;
}


}  // namespace

int main() {
  cudaDeviceProp properties{};
  CHECK_CUDA(cudaGetDeviceProperties(&properties, 0));
  Copy copy;
  copy.blocks = properties.multiProcessorCount * 8;
  CHECK_CUDA(cudaMalloc(&copy.source, kBytes));
  CHECK_CUDA(cudaMalloc(&copy.destination, kBytes));
  CHECK_CUDA(cudaMemset(copy.source, 1, kBytes));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) TimeBurst(copy, start, stop);  // warm-up, clocks up

  // Per round: a burst with tracing off; then tracing on, a first burst (it pays CUPTI's
  // one-time instrumentation of the kernel after enabling) and a steady-state burst.
  std::vector<double> off_us, first_burst_us, activity_us;
  int64_t records = 0, dropped = 0;
  for (int round = 0; round < kRounds; ++round) {
    off_us.push_back(TimeBurst(copy, start, stop));
    absl::StatusOr<ActivityTracer> tracer = ActivityTracer::Start({});
    if (!tracer.ok()) {
      std::fprintf(stderr, "activity tracing: %s\n", tracer.status().ToString().c_str());
      return 1;
    }
    first_burst_us.push_back(TimeBurst(copy, start, stop));
    activity_us.push_back(TimeBurst(copy, start, stop));
    if (!tracer->Stop().ok()) return 1;
    const auto batch = tracer->TakeBatch();
    records += batch.records_size();
    dropped += batch.dropped_records();
  }

  // METRICS level: tracing on while timing, then one kernel-replay profiling pass.
  std::vector<double> metrics_us;
  double profiling_ms = 0;
  std::string profiling_outcome;
  {
    absl::StatusOr<ActivityTracer> tracer = ActivityTracer::Start({});
    if (!tracer.ok()) return 1;
    for (int round = 0; round < kRounds; ++round) {
      metrics_us.push_back(TimeBurst(copy, start, stop));
    }
    const absl::Time before = absl::Now();
    absl::StatusOr<gpuprof::cupti::KernelMetricsReport> report =
        gpuprof::cupti::CollectKernelMetrics(
            {.metric_names = gpuprof::cupti::KernelMetricNames({})}, [&]() -> absl::Status {
              CHECK_CUDA(gpuprof::cupti::testing::LaunchCopyKernel(copy.source, copy.destination,
                                                                   kBytes, copy.blocks, nullptr));
              return absl::OkStatus();
            });
    profiling_ms = absl::ToDoubleMilliseconds(absl::Now() - before);
    if (report.ok() && !report->kernels.empty()) {
      const auto& values = report->kernels.front().values;
      char line[256];
      std::snprintf(line, sizeof(line), "%s; DRAM %.1f%%, SM %.1f%%",
                    report->replay_description.c_str(),
                    values.at(std::string(gpuprof::cupti::kDramThroughputPct)),
                    values.at(std::string(gpuprof::cupti::kSmThroughputPct)));
      profiling_outcome = line;
    } else {
      profiling_outcome = gpuprof::cupti::NotCollectedLine(
          "hardware metrics", report.ok() ? absl::NotFoundError("no ranges") : report.status());
    }
    if (!tracer->Stop().ok()) return 1;
    tracer->TakeBatch();
  }

  const double off = Median(off_us);
  const double activity = Median(activity_us);
  const double first_burst = Median(first_burst_us);
  const double metrics = Median(metrics_us);
  const double moved_gb = 2.0 * kBytes / 1e9;
  std::printf("device: %s (%d SMs)\n", properties.name, properties.multiProcessorCount);
  std::printf("kernel: grid-stride copy of 256 MiB (512 MiB moved), %d blocks x %d threads; "
              "%d rounds x %d launches, median of per-round means\n",
              copy.blocks, gpuprof::cupti::testing::kCopyThreadsPerBlock, kRounds,
              kLaunchesPerRound);
  std::printf("%-28s %10s %10s %10s\n", "mode", "us/launch", "GB/s", "overhead");
  std::printf("%-28s %10.2f %10.0f %10s\n", "tracing off", off, moved_gb / (off * 1e-6), "-");
  std::printf("%-28s %10.2f %10.0f %9.2f%%\n", "activity tracing", activity,
              moved_gb / (activity * 1e-6), 100 * (activity - off) / off);
  std::printf("%-28s %10.2f %10.0f %9.2f%%\n", "activity, 1st burst enabled", first_burst,
              moved_gb / (first_burst * 1e-6), 100 * (first_burst - off) / off);
  std::printf("%-28s %10.2f %10.0f %9.2f%%\n", "metrics level (timed part)", metrics,
              moved_gb / (metrics * 1e-6), 100 * (metrics - off) / off);
  std::printf("metrics level, profiling replay of one launch: %.1f ms wall (%s)\n", profiling_ms,
              profiling_outcome.c_str());
  std::printf("activity records taken: %lld, dropped: %lld\n", static_cast<long long>(records),
              static_cast<long long>(dropped));
  const double overhead = 100 * (activity - off) / off;
  std::printf("target <= 3%% added time with activity tracing: %s\n",
              overhead <= 3 ? "met" : "MISSED");
  return 0;
}
