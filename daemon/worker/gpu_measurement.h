// The measurement core shared by every GPU workload: warm-up, CUDA-event timing behind a
// blocking kernel (launch latency is not timed), optionally N launches per sample captured in
// a CUDA graph, a cold-L2 mode, stopping on a noise target / time budget / iteration cap,
// clock-throttling detection, statistics, and bytes moved against the GPU's spec peak and its
// measured copy bandwidth. Also the pieces each workload needs around it: the free-memory
// check before allocating and the JIT-compiled kernel with what the result says about it.
#ifndef GPUPROF_DAEMON_WORKER_GPU_MEASUREMENT_H_
#define GPUPROF_DAEMON_WORKER_GPU_MEASUREMENT_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/gpus.pb.h"
#include "kernels/copy_reference.h"
#include "kernels/jit_cache.h"
#include "kernels/jit_module.h"

namespace gpuprof::worker {

// Reports a phase's progress (done of total, with a short message).
using PhaseProgress = std::function<void(gpuprof::v1::Phase phase, int64_t done, int64_t total,
                                         const std::string& message)>;

// Enqueues the work of one timed unit (one kernel launch, or a fixed group such as the two
// launches of a separate-K/V store) on the stream.
using LaunchFunction = std::function<absl::Status(cudaStream_t stream)>;

struct MeasurementSetup {
  gpuprof::v1::MeasurementOptions options;
  // Bytes read + bytes written by one unit of work.
  int64_t bytes_per_launch = 0;
  // The GPU as the daemon described it: spec peak, measured copy bandwidth, L2, UUID.
  gpuprof::v1::GpuInfo gpu;
};

struct MeasurementOutcome {
  gpuprof::v1::GpuMeasurement measurement;
  // What could not be measured or checked, and why (for ExperimentResult.not_collected).
  std::vector<std::string> not_collected;
};

// Times `launch` on `stream` (current device) per `setup.options`. `stream_blocker` is the
// JIT-compiled stream blocker; without one, samples include launch latency and a note says so.
absl::StatusOr<MeasurementOutcome> MeasureGpuWorkload(const MeasurementSetup& setup,
                                                      const LaunchFunction& launch,
                                                      const kernels::JitKernel* stream_blocker,
                                                      cudaStream_t stream,
                                                      const PhaseProgress& progress);

// Device memory the cold-L2 mode allocates to flush the cache: twice the L2, at least 64 MiB.
int64_t L2FlushBytes(const gpuprof::v1::GpuInfo& gpu);

// Free memory of the current device.
absl::StatusOr<int64_t> FreeDeviceMemoryBytes();

// RESOURCE_EXHAUSTED, before anything is allocated, when `needed` (plus a small reserve for
// the CUDA context's own allocations) exceeds `free`: "index needs 3.00 GiB of GPU memory
// (table 2.00 GiB, output 1.00 GiB) but GPU 0 has 1.50 GiB free".
absl::Status CheckFitsInFreeMemory(absl::string_view workload, int64_t needed,
                                   absl::string_view breakdown, int64_t free_bytes, int gpu_index);

// "1.50 GiB", "64.0 MiB", "512 B".
std::string FormatBytes(int64_t bytes);

// ---- Pure pieces, exposed for tests. ----

// samples, min, median, mean, p90, p99, max (nearest rank), relative noise (stddev / mean).
gpuprof::v1::TimingStats ComputeTimingStats(std::vector<double> samples_us);

// Fills bytes_moved, bandwidth and the two percentages from the median time. A percentage
// stays 0 when its reference is unknown (0).
void FillBandwidth(int64_t bytes_per_launch, double median_us, double spec_peak_gbps,
                   double measured_copy_gbps, gpuprof::v1::GpuMeasurement& measurement);

// Without clock readings: a rise of the last quarter's median over the first quarter's by
// more than 5% (the sign of a clock that dropped while timing). "" when steady or too few.
std::string DescribeTimingDrift(const std::vector<double>& samples_us);

// From NVML readings around the timed phase: "" when the SM clock held and no throttle
// reason is set; otherwise what happened, e.g. "SM clock 1980 -> 1650 MHz; reasons: software
// power cap".
std::string DescribeClockThrottling(unsigned sm_clock_before_mhz, unsigned sm_clock_after_mhz,
                                    uint64_t clocks_event_reasons);

// A JIT-compiled kernel, loaded, with what the result reports about its compilation.
struct WorkloadKernel {
  kernels::JitKernel kernel;
  gpuprof::v1::JitInfo info;
  std::string cache_write_error;
};

// Compiles (or takes from the on-disk cache) and loads `request` for `arch`. `label` is the
// kernel as results show it, e.g. "index_gather<row=8192,splits=1,...>".
absl::StatusOr<WorkloadKernel> CompileWorkloadKernel(const kernels::JitCache& cache,
                                                     const kernels::JitRequest& request,
                                                     kernels::GpuArchitecture arch,
                                                     const std::string& label);

// ---- Helpers every GPU workload runner uses. ----

// The current device's architecture and multiprocessor count.
struct DeviceFacts {
  kernels::GpuArchitecture arch;
  int sm_count = 0;
};
absl::StatusOr<DeviceFacts> CurrentDeviceFacts();

// The kernels' element type for an API data type; INVALID_ARGUMENT for the others.
absl::StatusOr<kernels::ElementType> ElementTypeOf(gpuprof::v1::DataType dtype);

// RESOURCE_EXHAUSTED when the host lacks `needed` bytes of available memory for the CPU
// reference and the copies it compares ("... needs 2.00 GiB of host memory for ...").
absl::Status CheckFitsInHostMemory(absl::string_view workload, int64_t needed,
                                   absl::string_view purpose);

}  // namespace gpuprof::worker

#endif  // GPUPROF_DAEMON_WORKER_GPU_MEASUREMENT_H_
