// Each GPU's device-to-device copy bandwidth, timed by the same loop as every workload, so
// that "% of measured copy bandwidth" compares like with like: bytes read + written per second
// at the median of cudaMemcpyAsync between two buffers of the GPU.
#ifndef GPUPROF_MEASURE_COPY_BANDWIDTH_H_
#define GPUPROF_MEASURE_COPY_BANDWIDTH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "gpuprof/v1/gpus.pb.h"

namespace gpuprof::measure {

struct CopyBandwidthOptions {
  // Size of each of the two buffers; less when the GPU is short of free memory (half its free
  // memory is left to others).
  int64_t buffer_bytes = int64_t{1} << 30;
  // Timed copies per GPU; the median is reported.
  int timed_iterations = 10;
};

// About a second per GPU; allocates two buffers on it.
absl::StatusOr<double> MeasureCopyBandwidthGbps(const gpuprof::v1::GpuInfo& gpu,
                                                const CopyBandwidthOptions& options);

// Sets measured_copy_bandwidth_gbps of every GPU listed; a GPU that cannot be timed keeps 0
// (not measured) and the reason goes to stderr.
void FillMeasuredCopyBandwidth(gpuprof::v1::ListGpusResponse& response,
                               const CopyBandwidthOptions& options = {});

}  // namespace gpuprof::measure

#endif  // GPUPROF_MEASURE_COPY_BANDWIDTH_H_
