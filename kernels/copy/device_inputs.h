// The copy kernels' inputs made on the GPU and their outputs checked there, with statuses.
#ifndef GPUPROF_KERNELS_COPY_DEVICE_INPUTS_H_
#define GPUPROF_KERNELS_COPY_DEVICE_INPUTS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/copy/copy_reference.h"

namespace gpuprof::kernels {

// Fills `bytes` of device memory with the counter stream of `seed`: the bytes
// FillRandomBytes(seed) gives on the host. Asynchronous on `stream`.
absl::Status FillDeviceCounterBytes(void* device, int64_t bytes, uint64_t seed, int sm_count,
                                    cudaStream_t stream);

struct ScatteredCache {
  const void* cache;
  int64_t slots;
  int64_t row_bytes;
  ElementType element;
  // Device array: per slot, the token the scatter wrote there, or -1 (the slot keeps the fill).
  const int32_t* slot_tokens;
  // The scattered rows are the counter stream of this seed, token after token.
  uint64_t source_seed;
  uint8_t fill_byte;
};

// Checks every element of `cache` on the GPU and synchronises `stream`. Returns elements and
// mismatches (first_mismatch = the lowest mismatching element); max_abs_error stays 0.
absl::StatusOr<ComparisonResult> CheckScatteredCacheOnDevice(const ScatteredCache& cache,
                                                             int sm_count, cudaStream_t stream);

}  // namespace gpuprof::kernels

#endif  // GPUPROF_KERNELS_COPY_DEVICE_INPUTS_H_
