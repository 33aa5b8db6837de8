#include "gpu/nvml_devices.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpuprof::gpu {

absl::StatusOr<NvmlDevices> FindNvmlDevices(const NvmlLibrary& library,
                                            const std::vector<v1::GpuInfo>& gpus) {
  NvmlDevices devices;
  for (const v1::GpuInfo& gpu : gpus) {
    absl::StatusOr<nvml::Device> device = absl::NotFoundError("no PCI bus id or UUID");
    if (!gpu.pci_bus_id().empty()) device = library.DeviceByPciBusId(gpu.pci_bus_id());
    if (!device.ok() && !gpu.uuid().empty()) device = library.DeviceByUuid(gpu.uuid());
    if (device.ok()) {
      devices.found.emplace_back(gpu.index(), *device);
    } else {
      devices.not_found.push_back(absl::StrCat(gpu.index(), " (", device.status().message(), ")"));
    }
  }
  if (devices.found.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "NVML knows none of the GPUs: ",
        devices.not_found.empty() ? "none listed" : absl::StrJoin(devices.not_found, ", ")));
  }
  return devices;
}

}  // namespace gpuprof::gpu
