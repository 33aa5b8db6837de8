#include "workloads/custom_kernel/occupancy.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

namespace gpuprof::workloads {
namespace {

int64_t RoundUp(int64_t value, int64_t unit) { return (value + unit - 1) / unit * unit; }

}  // namespace

Occupancy ComputeOccupancy(const KernelFootprint& kernel, const SmLimits& sm) {
  constexpr int64_t kUnlimited = std::numeric_limits<int>::max();
  const int64_t warps_per_block = (kernel.block_threads + sm.warp_size - 1) / sm.warp_size;
  if (warps_per_block <= 0) return {.limiter = "threads per SM"};
  const int64_t max_warps = sm.max_threads_per_sm / sm.warp_size;

  const int64_t by_threads = max_warps / warps_per_block;
  const int64_t by_blocks = sm.max_blocks_per_sm;
  int64_t by_registers = kUnlimited;
  if (kernel.registers_per_thread > 0) {
    const int64_t per_warp =
        RoundUp(int64_t{kernel.registers_per_thread} * sm.warp_size, sm.register_allocation_unit);
    by_registers = (sm.registers_per_sm / per_warp) / warps_per_block;
  }
  int64_t by_shared = kUnlimited;
  const int64_t shared = kernel.static_shared_bytes + kernel.dynamic_shared_bytes;
  if (shared > 0) {
    const int64_t per_block =
        RoundUp(shared + sm.reserved_shared_bytes_per_block, sm.shared_allocation_unit);
    by_shared = sm.shared_bytes_per_sm / per_block;
  }
  // The SM's own limits first: on a tie, fewer registers or less shared memory would not help.
  const std::vector<std::pair<int64_t, const char*>> limits = {{by_threads, "threads per SM"},
                                                               {by_blocks, "blocks per SM"},
                                                               {by_registers, "registers"},
                                                               {by_shared, "shared memory"}};
  auto lowest = limits.begin();
  for (auto it = limits.begin(); it != limits.end(); ++it) {
    if (it->first < lowest->first) lowest = it;
  }
  Occupancy occupancy;
  occupancy.blocks_per_sm = static_cast<int>(std::max<int64_t>(0, lowest->first));
  occupancy.limiter = lowest->second;
  occupancy.theoretical = max_warps > 0 ? static_cast<double>(occupancy.blocks_per_sm *
                                                              warps_per_block) /
                                              static_cast<double>(max_warps)
                                        : 0;
  return occupancy;
}

}  // namespace gpuprof::workloads
