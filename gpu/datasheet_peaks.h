// Dense BF16 tensor-core peaks as the vendor's datasheets state them, by product name.
//
// The clock-derived peak (SMs x clock x FLOP/clock/SM, gpu_probe.h) does not match the sheets
// on every product: NVIDIA quotes Hopper's tensor figures at a lower clock than the maximum the
// GPU reports (an H100 SXM reports 1980 MHz; its 989.4 TFLOP/s is at 1830 MHz), and PCIe and NVL
// parts at their own power-limited clocks. "% of peak" should read against the sheet a user
// compares with, so the sheet wins where the product is known.
#ifndef GPUPROF_GPU_DATASHEET_PEAKS_H_
#define GPUPROF_GPU_DATASHEET_PEAKS_H_

#include <optional>

#include "absl/strings/string_view.h"

namespace gpuprof::gpu {

// TFLOP/s for a device name as CUDA reports it (e.g. "NVIDIA H100 80GB HBM3"); nullopt when the
// product is not in the table.
std::optional<double> DatasheetBf16DenseTflops(absl::string_view device_name);

}  // namespace gpuprof::gpu

#endif  // GPUPROF_GPU_DATASHEET_PEAKS_H_
