#include "kernels/copy/device_inputs.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/copy/device_inputs_kernels.h"

namespace gpuprof::kernels {

absl::Status FillDeviceCounterBytes(void* device, int64_t bytes, uint64_t seed, int sm_count,
                                    cudaStream_t stream) {
  CUDA_RETURN_IF_ERROR(LaunchCounterFill(device, bytes, seed, sm_count, stream));
  return absl::OkStatus();
}

absl::StatusOr<ComparisonResult> CheckScatteredCacheOnDevice(const ScatteredCache& cache,
                                                             int sm_count, cudaStream_t stream) {
  const int element_bytes = ElementBytes(cache.element);
  if (cache.row_bytes % element_bytes != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cache rows of ", cache.row_bytes,
                                                   " bytes are not whole elements of ",
                                                   element_bytes, " bytes"));
  }
  // [0] mismatches, [1] first mismatch.
  ASSIGN_OR_RETURN(DeviceBuffer counters, DeviceBuffer::Allocate(2 * sizeof(uint64_t)));
  const uint64_t initial[2] = {0, UINT64_MAX};
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(counters.data(), initial, sizeof(initial),
                                       cudaMemcpyHostToDevice, stream));
  auto* words = counters.data_as<unsigned long long>();
  CUDA_RETURN_IF_ERROR(LaunchScatteredCacheCheck({.cache = cache.cache,
                                                  .slots = cache.slots,
                                                  .row_bytes = cache.row_bytes,
                                                  .element_bytes = element_bytes,
                                                  .slot_tokens = cache.slot_tokens,
                                                  .source_seed = cache.source_seed,
                                                  .fill_byte = cache.fill_byte,
                                                  .mismatches = words,
                                                  .first_mismatch = words + 1},
                                                 sm_count, stream));
  uint64_t counted[2];
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(counted, counters.data(), sizeof(counted),
                                       cudaMemcpyDeviceToHost, stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  ComparisonResult result;
  result.elements = cache.slots * (cache.row_bytes / element_bytes);
  result.mismatches = static_cast<int64_t>(counted[0]);
  result.first_mismatch = counted[0] == 0 ? -1 : static_cast<int64_t>(counted[1]);
  return result;
}

}  // namespace gpuprof::kernels
