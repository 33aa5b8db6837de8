#include "daemon/worker/gpu_measurement.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <numeric>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "daemon/worker/nvml_loader.h"
#include "google/protobuf/util/time_util.h"
#include "kernels/copy_kernel_launch.h"
#include "kernels/kernel_params.h"

namespace gpuprof::worker {
namespace {

namespace api = ::gpuprof::v1;
using Clock = std::chrono::steady_clock;

// Room for what the CUDA context, graphs and events allocate beside the workload's buffers.
constexpr int64_t kContextReserveBytes = int64_t{256} << 20;
// A blocked stream is released after this long even if the host never does it.
constexpr int64_t kBlockerTimeoutNs = 5'000'000'000;
// The drift and clock checks flag changes larger than this.
constexpr double kThrottleThreshold = 0.05;
constexpr auto kProgressInterval = std::chrono::milliseconds(250);

// Owners of a captured graph and its executable form.
class CudaGraph {
 public:
  CudaGraph() = default;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph() {
    if (exec_ != nullptr) CUDA_LOG_IF_ERROR(cudaGraphExecDestroy(exec_));
    if (graph_ != nullptr) CUDA_LOG_IF_ERROR(cudaGraphDestroy(graph_));
  }

  // Captures `launches` units of `launch` on `stream`.
  absl::Status Capture(const LaunchFunction& launch, int launches, cudaStream_t stream) {
    CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    absl::Status launched = absl::OkStatus();
    for (int i = 0; i < launches && launched.ok(); ++i) launched = launch(stream);
    // End the capture whatever happened, so the stream is usable (or its error reported).
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph_);
    RETURN_IF_ERROR(launched);
    CUDA_RETURN_IF_ERROR(ended);
    CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&exec_, graph_, 0));
    return absl::OkStatus();
  }

  absl::Status Launch(cudaStream_t stream) const {
    CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec_, stream));
    return absl::OkStatus();
  }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// A host int the GPU can read (mapped pinned memory): the stream blocker's release flag.
class MappedReleaseFlag {
 public:
  static absl::StatusOr<std::unique_ptr<MappedReleaseFlag>> Create() {
    auto flag = std::unique_ptr<MappedReleaseFlag>(new MappedReleaseFlag());
    CUDA_RETURN_IF_ERROR(cudaHostAlloc(&flag->host_, sizeof(int32_t), cudaHostAllocMapped));
    CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer(&flag->device_, flag->host_, 0));
    flag->Set(0);
    return flag;
  }
  MappedReleaseFlag(const MappedReleaseFlag&) = delete;
  MappedReleaseFlag& operator=(const MappedReleaseFlag&) = delete;
  ~MappedReleaseFlag() {
    if (host_ != nullptr) CUDA_LOG_IF_ERROR(cudaFreeHost(host_));
  }

  void Set(int32_t value) {
    std::atomic_ref<int32_t>(*static_cast<int32_t*>(host_)).store(value, std::memory_order_seq_cst);
  }
  const int32_t* device() const { return static_cast<const int32_t*>(device_); }

 private:
  MappedReleaseFlag() = default;
  void* host_ = nullptr;
  void* device_ = nullptr;
};

double NearestRank(const std::vector<double>& sorted, double percentile) {
  const size_t rank = static_cast<size_t>(std::ceil(percentile / 100.0 * sorted.size()));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

double MedianOf(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

// Clock readings around the timed phase, when NVML can give them.
struct ClockProbe {
  std::optional<NvmlLibrary> nvml;
  nvml::Device device = nullptr;
  std::string unavailable;  // why not
};

ClockProbe OpenClockProbe(const api::GpuInfo& gpu) {
  ClockProbe probe;
  absl::StatusOr<NvmlLibrary> nvml = NvmlLibrary::Load();
  if (!nvml.ok()) {
    probe.unavailable = std::string(nvml.status().message());
    return probe;
  }
  absl::StatusOr<nvml::Device> device = nvml->DeviceByUuid(gpu.uuid());
  if (!device.ok()) {
    probe.unavailable = std::string(device.status().message());
    return probe;
  }
  probe.device = *device;
  probe.nvml.emplace(*std::move(nvml));
  return probe;
}

std::optional<unsigned> ReadSmClock(const ClockProbe& probe) {
  if (!probe.nvml.has_value()) return std::nullopt;
  absl::StatusOr<unsigned> clock = probe.nvml->ClockMhz(probe.device, nvml::ClockType::kSm);
  if (!clock.ok()) return std::nullopt;
  return *clock;
}

}  // namespace

int64_t L2FlushBytes(const api::GpuInfo& gpu) {
  return std::max<int64_t>(2 * gpu.l2_cache_bytes(), int64_t{64} << 20);
}

absl::StatusOr<int64_t> FreeDeviceMemoryBytes() {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  return static_cast<int64_t>(free_bytes);
}

std::string FormatBytes(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) return absl::StrFormat("%.2f GiB", bytes / 1073741824.0);
  if (bytes >= (int64_t{1} << 20)) return absl::StrFormat("%.1f MiB", bytes / 1048576.0);
  if (bytes >= (int64_t{1} << 10)) return absl::StrFormat("%.1f KiB", bytes / 1024.0);
  return absl::StrCat(bytes, " B");
}

absl::Status CheckFitsInFreeMemory(absl::string_view workload, int64_t needed,
                                   absl::string_view breakdown, int64_t free_bytes, int gpu_index) {
  if (needed + kContextReserveBytes <= free_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrFormat("%s needs %s of GPU memory (%s) plus %s of headroom, but GPU %d has %s free",
                      workload, FormatBytes(needed), breakdown, FormatBytes(kContextReserveBytes),
                      gpu_index, FormatBytes(free_bytes)));
}

api::TimingStats ComputeTimingStats(std::vector<double> samples_us) {
  api::TimingStats stats;
  if (samples_us.empty()) return stats;
  std::sort(samples_us.begin(), samples_us.end());
  const double count = static_cast<double>(samples_us.size());
  const double mean = std::accumulate(samples_us.begin(), samples_us.end(), 0.0) / count;
  double squares = 0;
  for (double sample : samples_us) squares += (sample - mean) * (sample - mean);
  const double stddev = samples_us.size() > 1 ? std::sqrt(squares / (count - 1)) : 0.0;
  stats.set_samples(static_cast<int64_t>(samples_us.size()));
  stats.set_min_us(samples_us.front());
  stats.set_median_us(MedianOf(samples_us));
  stats.set_mean_us(mean);
  stats.set_p90_us(NearestRank(samples_us, 90));
  stats.set_p99_us(NearestRank(samples_us, 99));
  stats.set_max_us(samples_us.back());
  stats.set_relative_noise(mean > 0 ? stddev / mean : 0.0);
  return stats;
}

void FillBandwidth(int64_t bytes_per_launch, double median_us, double spec_peak_gbps,
                   double measured_copy_gbps, api::GpuMeasurement& measurement) {
  measurement.set_bytes_moved(bytes_per_launch);
  if (median_us <= 0) return;
  const double gbps = static_cast<double>(bytes_per_launch) / (median_us * 1e-6) / 1e9;
  measurement.set_bandwidth_gbps(gbps);
  if (spec_peak_gbps > 0) measurement.set_pct_of_spec_peak_bandwidth(100.0 * gbps / spec_peak_gbps);
  if (measured_copy_gbps > 0) {
    measurement.set_pct_of_measured_copy_bandwidth(100.0 * gbps / measured_copy_gbps);
  }
}

std::string DescribeTimingDrift(const std::vector<double>& samples_us) {
  constexpr size_t kMinimumSamples = 20;
  if (samples_us.size() < kMinimumSamples) return "";
  const size_t quarter = samples_us.size() / 4;
  const double first = MedianOf({samples_us.begin(), samples_us.begin() + quarter});
  const double last = MedianOf({samples_us.end() - quarter, samples_us.end()});
  if (first <= 0 || last <= first * (1 + kThrottleThreshold)) return "";
  return absl::StrFormat(
      "sample times rose %.1f%% from the first to the last quarter of the run (%.2f -> %.2f "
      "us median): the clock may have dropped",
      100.0 * (last / first - 1), first, last);
}

std::string DescribeClockThrottling(unsigned sm_clock_before_mhz, unsigned sm_clock_after_mhz,
                                    uint64_t clocks_event_reasons) {
  // nvmlClocksEventReason* bits that mean the GPU was held back (not idle, not app clocks).
  static constexpr std::pair<uint64_t, const char*> kReasons[] = {{0x4, "software power cap"},
                                                                  {0x8, "hardware slowdown"},
                                                                  {0x20, "software thermal"},
                                                                  {0x40, "hardware thermal"},
                                                                  {0x80, "hardware power brake"}};
  std::vector<std::string> reasons;
  for (const auto& [bit, name] : kReasons) {
    if ((clocks_event_reasons & bit) != 0) reasons.push_back(name);
  }
  const bool clock_dropped = sm_clock_after_mhz < sm_clock_before_mhz * (1 - kThrottleThreshold);
  if (!clock_dropped && reasons.empty()) return "";
  std::string description =
      absl::StrFormat("SM clock %u -> %u MHz", sm_clock_before_mhz, sm_clock_after_mhz);
  if (!reasons.empty()) absl::StrAppend(&description, "; reasons: ", absl::StrJoin(reasons, ", "));
  return description;
}

absl::StatusOr<MeasurementOutcome> MeasureGpuWorkload(const MeasurementSetup& setup,
                                                      const LaunchFunction& launch,
                                                      const kernels::JitKernel* stream_blocker,
                                                      cudaStream_t stream,
                                                      const PhaseProgress& progress) {
  const api::MeasurementOptions& options = setup.options;
  MeasurementOutcome outcome;
  api::GpuMeasurement& measurement = outcome.measurement;
  const bool cold = options.l2_mode() == api::MeasurementOptions::L2_MODE_COLD;
  measurement.set_l2_mode(cold ? api::MeasurementOptions::L2_MODE_COLD
                               : api::MeasurementOptions::L2_MODE_HOT);

  // Resources first, so that nothing fails half-way through the timed loop.
  DeviceBuffer flush;
  if (cold) {
    ASSIGN_OR_RETURN(flush, DeviceBuffer::Allocate(L2FlushBytes(setup.gpu)));
  }
  std::unique_ptr<MappedReleaseFlag> release;
  if (stream_blocker != nullptr) {
    ASSIGN_OR_RETURN(release, MappedReleaseFlag::Create());
  } else {
    outcome.not_collected.push_back(
        "launch latency: no stream blocker, so each sample includes the launch's host latency");
  }
  ASSIGN_OR_RETURN(CudaEvent start, CudaEvent::Create());
  ASSIGN_OR_RETURN(CudaEvent stop, CudaEvent::Create());

  // One sample: a graph of N units, or one unit.
  const int graph_launches = options.graph_launches_per_sample();
  CudaGraph graph;
  if (graph_launches > 0) {
    RETURN_IF_ERROR(graph.Capture(launch, graph_launches, stream));
    measurement.set_used_cuda_graph(true);
  }
  const int units_per_sample = graph_launches > 0 ? graph_launches : 1;
  auto run_sample = [&]() -> absl::Status {
    return graph_launches > 0 ? graph.Launch(stream) : launch(stream);
  };

  // Warm-up: clocks up, caches and TLBs set, lazy module loading done.
  const int warmup = options.warmup_iterations();
  progress(api::PHASE_WARMUP, 0, warmup, "warming up");
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(run_sample());
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  progress(api::PHASE_WARMUP, warmup, warmup, "warmed up");

  ClockProbe clocks = OpenClockProbe(setup.gpu);
  const std::optional<unsigned> clock_before = ReadSmClock(clocks);

  const int64_t min_samples = std::max(1, options.min_iterations());
  const int64_t max_samples = std::max<int64_t>(min_samples, options.max_iterations());
  const auto budget = std::chrono::nanoseconds(
      google::protobuf::util::TimeUtil::DurationToNanoseconds(options.time_budget()));
  std::vector<double> samples_us;
  samples_us.reserve(std::min<int64_t>(max_samples, 100'000));
  double sum = 0;
  double sum_of_squares = 0;
  const auto timed_start = Clock::now();
  auto last_progress = timed_start;
  progress(api::PHASE_TIMED, 0, max_samples, "timing");
  std::string stop_reason;
  while (true) {
    if (cold) {
      // Writing a buffer twice the L2's size evicts whatever the last sample left there.
      CUDA_RETURN_IF_ERROR(cudaMemsetAsync(flush.data(), static_cast<int>(samples_us.size() & 0xff),
                                           flush.bytes(), stream));
    }
    if (release != nullptr) {
      release->Set(0);
      RETURN_IF_ERROR(kernels::LaunchStreamBlocker(
          *stream_blocker,
          kernels::StreamBlockerParams{.release = release->device(),
                                       .timeout_ns = kBlockerTimeoutNs},
          stream));
    }
    // Everything of the sample is queued before the blocker lets the GPU start on it.
    absl::Status queued = start.Record(stream);
    if (queued.ok()) queued = run_sample();
    if (queued.ok()) queued = stop.Record(stream);
    if (release != nullptr) release->Set(1);  // never leave the blocker waiting
    RETURN_IF_ERROR(queued);
    CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop.get()));
    ASSIGN_OR_RETURN(const float milliseconds, ElapsedMilliseconds(start, stop));
    const double sample = 1000.0 * milliseconds / units_per_sample;
    samples_us.push_back(sample);
    sum += sample;
    sum_of_squares += sample * sample;

    const int64_t count = static_cast<int64_t>(samples_us.size());
    const double mean = sum / count;
    const double variance =
        count > 1 ? std::max(0.0, (sum_of_squares - count * mean * mean) / (count - 1)) : 0.0;
    const double noise = mean > 0 ? std::sqrt(variance) / mean : 0.0;
    const auto now = Clock::now();
    if (count >= max_samples) {
      stop_reason = "max iterations";
    } else if (count >= min_samples && count > 1 && noise <= options.noise_target()) {
      stop_reason = "noise target reached";
    } else if (now - timed_start >= budget) {
      stop_reason = "time budget";
    }
    if (!stop_reason.empty()) break;
    if (now - last_progress >= kProgressInterval) {
      last_progress = now;
      progress(api::PHASE_TIMED, count, max_samples,
               absl::StrFormat("%d samples, mean %.2f us, noise %.2f%%", count, mean, 100 * noise));
    }
  }
  const std::optional<unsigned> clock_after = ReadSmClock(clocks);

  *measurement.mutable_kernel_time() = ComputeTimingStats(samples_us);
  measurement.set_stop_reason(stop_reason);
  FillBandwidth(setup.bytes_per_launch, measurement.kernel_time().median_us(),
                setup.gpu.spec_peak_bandwidth_gbps(), setup.gpu.measured_copy_bandwidth_gbps(),
                measurement);
  if (setup.gpu.measured_copy_bandwidth_gbps() <= 0) {
    outcome.not_collected.push_back(absl::StrCat(
        "pct_of_measured_copy_bandwidth: the daemon has no copy bandwidth measured for GPU ",
        setup.gpu.index()));
  }
  progress(api::PHASE_TIMED, measurement.kernel_time().samples(), max_samples, stop_reason);

  // Throttling: NVML's clock and reasons when available; the samples' drift either way.
  std::string throttling;
  if (clock_before.has_value() && clock_after.has_value()) {
    absl::StatusOr<uint64_t> reasons = clocks.nvml->ClocksEventReasons(clocks.device);
    throttling = DescribeClockThrottling(*clock_before, *clock_after, reasons.ok() ? *reasons : 0);
  } else {
    outcome.not_collected.push_back(
        absl::StrCat("SM clock readings (NVML: ",
                     clocks.unavailable.empty() ? "clock query failed" : clocks.unavailable,
                     "); throttling judged from the drift of sample times only"));
  }
  const std::string drift = DescribeTimingDrift(samples_us);
  if (!drift.empty())
    throttling = throttling.empty() ? drift : absl::StrCat(throttling, "; ", drift);
  measurement.set_throttling(throttling);
  return outcome;
}

absl::StatusOr<WorkloadKernel> CompileWorkloadKernel(const kernels::JitCache& cache,
                                                     const kernels::JitRequest& request,
                                                     kernels::GpuArchitecture arch,
                                                     const std::string& label) {
  ASSIGN_OR_RETURN(kernels::JitBinary binary, cache.GetOrCompile(request, arch));
  WorkloadKernel compiled;
  ASSIGN_OR_RETURN(compiled.kernel, kernels::JitKernel::Load(binary));
  compiled.info.set_kernel(label);
  compiled.info.set_cache_key(binary.cache_key);
  compiled.info.set_cache_hit(binary.cache_hit);
  compiled.info.set_compile_ms(binary.compile_ms);
  compiled.cache_write_error = binary.cache_write_error;
  return compiled;
}

absl::StatusOr<DeviceFacts> CurrentDeviceFacts() {
  int device = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  DeviceFacts facts;
  CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&facts.arch.major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&facts.arch.minor, cudaDevAttrComputeCapabilityMinor, device));
  CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&facts.sm_count, cudaDevAttrMultiProcessorCount, device));
  return facts;
}

absl::StatusOr<kernels::ElementType> ElementTypeOf(api::DataType dtype) {
  switch (dtype) {
    case api::DATA_TYPE_FP32:
      return kernels::ElementType::kFloat32;
    case api::DATA_TYPE_FP16:
      return kernels::ElementType::kFloat16;
    case api::DATA_TYPE_BF16:
      return kernels::ElementType::kBFloat16;
    case api::DATA_TYPE_FP8_E4M3:
      return kernels::ElementType::kFloat8E4M3;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "dtype: got ", api::DataType_Name(dtype), "; must be one of fp32, fp16, bf16, fp8_e4m3"));
  }
}

absl::Status CheckFitsInHostMemory(absl::string_view workload, int64_t needed,
                                   absl::string_view purpose) {
  // MemAvailable counts reclaimable page cache, unlike sysconf's free pages.
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key != "MemAvailable:") continue;
    const int64_t available = kib * 1024;
    if (needed <= available) return absl::OkStatus();
    return absl::ResourceExhaustedError(
        absl::StrFormat("%s needs %s of host memory for %s, but %s is available", workload,
                        FormatBytes(needed), purpose, FormatBytes(available)));
  }
  return absl::OkStatus();  // unknown: let the allocation try
}

}  // namespace gpuprof::worker
