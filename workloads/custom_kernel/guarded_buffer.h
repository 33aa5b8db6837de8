// Device memory handed to a submitted kernel: cleared before anything is written (a kernel
// must not read what an earlier experiment left), and, for outputs, guard bytes of a known
// pattern before and after, whose changes after a run are out-of-bounds writes.
#ifndef GPUPROF_WORKLOADS_CUSTOM_KERNEL_GUARDED_BUFFER_H_
#define GPUPROF_WORKLOADS_CUSTOM_KERNEL_GUARDED_BUFFER_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/cuda_raii.h"

namespace gpuprof::workloads {

// Bytes of guard on each side of an output; a multiple of 256, so the output stays as
// aligned as cudaMalloc's memory.
inline constexpr int64_t kGuardBytes = 4096;
// What the guards hold: a byte no copy of our inputs is likely to leave everywhere.
inline constexpr uint8_t kGuardByte = 0xcd;

// cudaMalloc'ed memory set to zero before it is returned.
absl::StatusOr<DeviceBuffer> AllocateClearedDeviceBuffer(int64_t bytes);

// Overwritten guard bytes on each side of an output.
struct GuardDamage {
  int64_t before = 0;
  int64_t after = 0;
  int64_t total() const { return before + after; }
};

class GuardedDeviceBuffer {
 public:
  // `bytes` for the kernel, cleared, between two guards of kGuardByte.
  static absl::StatusOr<GuardedDeviceBuffer> Allocate(int64_t bytes);

  GuardedDeviceBuffer() = default;

  // What the kernel is given.
  void* data() const { return static_cast<char*>(memory_.data()) + kGuardBytes; }
  int64_t bytes() const { return bytes_; }

  // Counts the guard bytes that no longer hold kGuardByte (synchronous).
  absl::StatusOr<GuardDamage> CheckGuards() const;

 private:
  DeviceBuffer memory_;
  int64_t bytes_ = 0;
};

// "out-of-bounds write: 16 guard bytes after the output changed" (`what` is "the output"),
// or empty when there is no damage.
std::string DescribeGuardDamage(const GuardDamage& damage, const std::string& what);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_CUSTOM_KERNEL_GUARDED_BUFFER_H_
