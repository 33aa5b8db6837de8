// Reads per-GPU telemetry (utilisation, memory, SM clock, temperature, power, throttle reasons)
// through NVML, loaded at run time: the daemon never creates a CUDA context, and NVML needs
// none. On a machine without the driver there is no NVML, and so no reader.
#ifndef GPUPROF_DAEMON_METRICS_GPU_TELEMETRY_READER_H_
#define GPUPROF_DAEMON_METRICS_GPU_TELEMETRY_READER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/metrics/daemon_metrics.h"
#include "gpu/nvml_loader.h"
#include "gpuprof/v1/gpus.pb.h"

namespace gpuprof::daemon {

class GpuTelemetryReader {
 public:
  // Loads NVML from `nvml_path` and finds each GPU of the inventory by PCI bus id (else UUID).
  // UNAVAILABLE (NVML absent) or NVML's init error when it cannot be used; NOT_FOUND when
  // none of the GPUs is known to NVML. GPUs NVML does not know are left out.
  static absl::StatusOr<std::unique_ptr<GpuTelemetryReader>> Create(
      const std::vector<v1::GpuInfo>& gpus, const std::string& nvml_path = "libnvidia-ml.so.1");

  // One sample per GPU; readings NVML refuses on a GPU are left empty.
  std::vector<GpuTelemetry> Read() const;

  // GPU indices telemetry is read for.
  std::vector<int> gpu_indices() const;

 private:
  GpuTelemetryReader(gpu::NvmlLibrary nvml,
                     std::vector<std::pair<int, gpu::nvml::Device>> devices);

  gpu::NvmlLibrary nvml_;
  // GPU index -> NVML handle; handles stay valid until nvmlShutdown.
  std::vector<std::pair<int, gpu::nvml::Device>> devices_;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_METRICS_GPU_TELEMETRY_READER_H_
