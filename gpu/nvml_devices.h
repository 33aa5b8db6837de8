// The daemon's GPUs as NVML devices: each found by PCI bus id, else by UUID, so that health
// and telemetry read the same GPU the inventory (probed through CUDA) names.
#ifndef GPUPROF_GPU_NVML_DEVICES_H_
#define GPUPROF_GPU_NVML_DEVICES_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gpu/nvml_loader.h"
#include "gpuprof/v1/gpus.pb.h"

namespace gpuprof::gpu {

struct NvmlDevices {
  // (inventory index, device) for every GPU NVML knows.
  std::vector<std::pair<int, nvml::Device>> found;
  // "3 (why)" for each GPU it does not.
  std::vector<std::string> not_found;
};

// NOT_FOUND naming each GPU when NVML knows none of them.
absl::StatusOr<NvmlDevices> FindNvmlDevices(const NvmlLibrary& library,
                                            const std::vector<v1::GpuInfo>& gpus);

}  // namespace gpuprof::gpu

#endif  // GPUPROF_GPU_NVML_DEVICES_H_
