#include "measure/copy_bandwidth.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "google/protobuf/util/time_util.h"
#include "measure/timing_loop.h"

namespace gpuprof::measure {

namespace v1 = ::gpuprof::v1;

absl::StatusOr<double> MeasureCopyBandwidthGbps(const v1::GpuInfo& gpu,
                                                const CopyBandwidthOptions& options) {
  // Declared first so that the buffers and stream below go while it is current.
  ASSIGN_OR_RETURN(ScopedCudaDevice scoped_device, ScopedCudaDevice::Activate(gpu.index()));
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  // Leave half the free memory to whoever else is on the GPU.
  constexpr int64_t kAlignment = int64_t{2} << 20;
  constexpr int64_t kMinimumBytes = int64_t{64} << 20;  // smaller copies time launch latency
  int64_t bytes =
      std::min<int64_t>(options.buffer_bytes, static_cast<int64_t>(free_bytes / 4));
  bytes -= bytes % kAlignment;
  if (bytes < kMinimumBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "GPU ", gpu.index(), " has ", free_bytes, " bytes free, too few to time copies"));
  }
  ASSIGN_OR_RETURN(DeviceBuffer source, DeviceBuffer::Allocate(bytes));
  ASSIGN_OR_RETURN(DeviceBuffer destination, DeviceBuffer::Allocate(bytes));
  ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create());
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(source.data(), 1, bytes, stream.get()));

  MeasurementSetup setup;
  setup.gpu = gpu;
  setup.bytes_per_launch = 2 * bytes;
  const int iterations = std::max(1, options.timed_iterations);
  setup.options.set_warmup_iterations(3);
  setup.options.set_min_iterations(iterations);
  setup.options.set_max_iterations(iterations);
  *setup.options.mutable_time_budget() = google::protobuf::util::TimeUtil::SecondsToDuration(60);
  const TimedStream copy{
      .stream = stream.get(),
      .device = gpu.index(),
      .launch = [&](cudaStream_t on) {
        return CudaStatus(cudaMemcpyAsync(destination.data(), source.data(), bytes,
                                          cudaMemcpyDeviceToDevice, on),
                          "cudaMemcpyAsync");
      }};
  ASSIGN_OR_RETURN(const MeasurementOutcome outcome,
                   MeasureStreams(setup, {&copy, 1},
                                           [](v1::Phase, int64_t, int64_t, const std::string&) {}));
  if (outcome.measurement.bandwidth_gbps() <= 0) {
    return absl::InternalError("copy timed at zero seconds");
  }
  return outcome.measurement.bandwidth_gbps();
}

void FillMeasuredCopyBandwidth(v1::ListGpusResponse& response,
                               const CopyBandwidthOptions& options) {
  for (v1::GpuInfo& gpu : *response.mutable_gpus()) {
    absl::StatusOr<double> gbps = MeasureCopyBandwidthGbps(gpu, options);
    if (gbps.ok()) {
      gpu.set_measured_copy_bandwidth_gbps(*gbps);
    } else {
      // Left at 0 ("not measured"); the worker's stderr goes to its log in the daemon.
      const std::string line = absl::StrCat("gpuprof: GPU ", gpu.index(),
                                            ": copy bandwidth not measured: ",
                                            gbps.status().message(), "\n");
      std::fputs(line.c_str(), stderr);
    }
  }
}

}  // namespace gpuprof::measure
