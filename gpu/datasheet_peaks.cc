#include "gpu/datasheet_peaks.h"

#include "absl/strings/match.h"

namespace gpuprof::gpu {

std::optional<double> DatasheetBf16DenseTflops(absl::string_view device_name) {
  auto has = [&](absl::string_view part) { return absl::StrContains(device_name, part); };
  const bool hopper = has("H100") || has("H200");
  if (hopper && has("PCIe")) return 756.0;
  if (hopper && has("NVL")) return 835.0;
  if (hopper || has("GH200")) return 989.4;  // SXM parts (CUDA names them "H100 80GB HBM3")
  if (has("A100")) return 312.0;
  if (has("L40S")) return 362.0;
  return std::nullopt;
}

}  // namespace gpuprof::gpu
