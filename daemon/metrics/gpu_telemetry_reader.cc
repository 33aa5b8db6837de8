#include "daemon/metrics/gpu_telemetry_reader.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpu/nvml_devices.h"

namespace gpuprof::daemon {

namespace nvml = gpu::nvml;

absl::StatusOr<std::unique_ptr<GpuTelemetryReader>> GpuTelemetryReader::Create(
    const std::vector<v1::GpuInfo>& gpus, const std::string& nvml_path) {
  absl::StatusOr<gpu::NvmlLibrary> library = gpu::NvmlLibrary::Load(nvml_path);
  if (!library.ok()) return library.status();
  absl::StatusOr<gpu::NvmlDevices> devices = gpu::FindNvmlDevices(*library, gpus);
  if (!devices.ok()) return devices.status();
  return std::unique_ptr<GpuTelemetryReader>(
      new GpuTelemetryReader(*std::move(library), std::move(devices->found)));
}

GpuTelemetryReader::GpuTelemetryReader(gpu::NvmlLibrary nvml,
                                       std::vector<std::pair<int, nvml::Device>> devices)
    : nvml_(std::move(nvml)), devices_(std::move(devices)) {}

std::vector<int> GpuTelemetryReader::gpu_indices() const {
  std::vector<int> indices;
  for (const auto& [index, device] : devices_) indices.push_back(index);
  return indices;
}

std::vector<GpuTelemetry> GpuTelemetryReader::Read() const {
  std::vector<GpuTelemetry> samples;
  samples.reserve(devices_.size());
  for (const auto& [index, device] : devices_) {
    GpuTelemetry sample;
    sample.gpu = index;
    if (auto utilization = nvml_.UtilizationRates(device); utilization.ok()) {
      sample.utilization_ratio = utilization->gpu / 100.0;
      sample.memory_controller_utilization_ratio = utilization->memory / 100.0;
    }
    if (auto memory = nvml_.MemoryInfo(device); memory.ok()) {
      sample.memory_used_bytes = static_cast<double>(memory->used);
      sample.memory_total_bytes = static_cast<double>(memory->total);
    }
    if (auto clock = nvml_.ClockMhz(device, nvml::ClockType::kSm); clock.ok()) {
      sample.sm_clock_hertz = *clock * 1e6;
    }
    if (auto temperature = nvml_.GpuTemperatureCelsius(device); temperature.ok()) {
      sample.temperature_celsius = *temperature;
    }
    if (auto power = nvml_.PowerUsageMilliwatts(device); power.ok()) {
      sample.power_watts = *power / 1000.0;
    }
    if (auto reasons = nvml_.ClocksEventReasons(device); reasons.ok()) {
      sample.clocks_event_reasons = *reasons;
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

}  // namespace gpuprof::daemon
