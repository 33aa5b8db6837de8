// Facts about the current CUDA device that a workload needs before it allocates: its
// architecture and SM count, and whether its buffers fit in the device's (and the host's)
// free memory, refused with a message that says what needs how much.
#ifndef GPUPROF_GPU_DEVICE_FACTS_H_
#define GPUPROF_GPU_DEVICE_FACTS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuprof::gpu {

struct DeviceFacts {
  int compute_major = 0;
  int compute_minor = 0;
  int sm_count = 0;
  int max_shared_bytes_per_block = 0;  // dynamic shared memory a block may opt in to
};

// The current device's compute capability, multiprocessor count and a block's shared-memory
// limit, read once per device.
absl::StatusOr<DeviceFacts> CurrentDeviceFacts();

// Free memory of the current device.
absl::StatusOr<int64_t> FreeDeviceMemoryBytes();

// RESOURCE_EXHAUSTED, before anything is allocated, when `needed` (plus a small reserve for
// the CUDA context's own allocations) exceeds `free`: "index needs 3.00 GiB of GPU memory
// (table 2.00 GiB, output 1.00 GiB) plus 256.0 MiB of headroom, but GPU 0 has 1.50 GiB free".
absl::Status CheckFitsInFreeMemory(absl::string_view workload, int64_t needed,
                                   absl::string_view breakdown, int64_t free_bytes, int gpu_index);

// RESOURCE_EXHAUSTED when the host lacks `needed` bytes of available memory for the CPU
// reference and the copies it compares ("... needs 2.00 GiB of host memory for ...").
absl::Status CheckFitsInHostMemory(absl::string_view workload, int64_t needed,
                                   absl::string_view purpose);

}  // namespace gpuprof::gpu

#endif  // GPUPROF_GPU_DEVICE_FACTS_H_
