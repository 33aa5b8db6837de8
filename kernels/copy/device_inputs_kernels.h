// Launchers of the kernels that make and check the copy kernels' data on the GPU (nvcc-built;
// device_inputs.h wraps them in statuses).
#ifndef GPUPROF_KERNELS_COPY_DEVICE_INPUTS_KERNELS_H_
#define GPUPROF_KERNELS_COPY_DEVICE_INPUTS_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace gpuprof::kernels {

// Writes bytes [0, bytes) of the counter stream of `seed` (counter_bytes.h) to `device`.
cudaError_t LaunchCounterFill(void* device, int64_t bytes, uint64_t seed, int sm_count,
                              cudaStream_t stream);

struct ScatteredCacheCheckParams {
  const void* cache;
  int64_t slots;
  int64_t row_bytes;
  int element_bytes;  // 1, 2 or 4
  // Per slot, the token whose row the scatter wrote there, or -1.
  const int32_t* slot_tokens;
  // Token t's row is bytes [t * row_bytes, (t + 1) * row_bytes) of this seed's stream.
  uint64_t source_seed;
  uint8_t fill_byte;
  // Out (device memory, zero and UINT64_MAX before the launch): mismatching elements, and the
  // lowest mismatching element index.
  unsigned long long* mismatches;
  unsigned long long* first_mismatch;
};

// Compares every element of a KV cache with what a scatter must leave there.
cudaError_t LaunchScatteredCacheCheck(const ScatteredCacheCheckParams& params, int sm_count,
                                      cudaStream_t stream);

}  // namespace gpuprof::kernels

#endif  // GPUPROF_KERNELS_COPY_DEVICE_INPUTS_KERNELS_H_
