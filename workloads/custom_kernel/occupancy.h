// Theoretical occupancy of a compiled kernel at a launch shape, and what limits it: the
// CUDA occupancy calculator's arithmetic over the kernel's registers and shared memory and
// the SM's limits. Pure, so that it is tested without a GPU; the worker checks its blocks per
// SM against the runtime's cudaOccupancyMaxActiveBlocksPerMultiprocessor where that answers.
#ifndef GPUPROF_WORKLOADS_CUSTOM_KERNEL_OCCUPANCY_H_
#define GPUPROF_WORKLOADS_CUSTOM_KERNEL_OCCUPANCY_H_

#include <cstdint>
#include <string>

namespace gpuprof::workloads {

// One SM's limits (cudaDeviceProp). Defaults: an H100 (sm_90).
struct SmLimits {
  int max_threads_per_sm = 2048;
  int max_blocks_per_sm = 32;
  int registers_per_sm = 65536;
  int64_t shared_bytes_per_sm = 233472;            // sharedMemPerMultiprocessor
  int64_t reserved_shared_bytes_per_block = 1024;  // reservedSharedMemPerBlock
  int warp_size = 32;
  // Registers are given to a warp in units of this many.
  int register_allocation_unit = 256;
  // Shared memory is given to a block in units of this many bytes.
  int shared_allocation_unit = 128;
};

struct KernelFootprint {
  int block_threads = 0;
  int registers_per_thread = 0;
  int64_t static_shared_bytes = 0;
  int64_t dynamic_shared_bytes = 0;
};

struct Occupancy {
  int blocks_per_sm = 0;
  // Resident warps over the SM's maximum.
  double theoretical = 0;
  // What caps blocks_per_sm: "registers", "shared memory", "threads per SM", "blocks per SM".
  std::string limiter;
};

Occupancy ComputeOccupancy(const KernelFootprint& kernel, const SmLimits& sm);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_CUSTOM_KERNEL_OCCUPANCY_H_
