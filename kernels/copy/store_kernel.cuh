// KV-cache scatter: k_cache[slots[t], :] = k[t, :] (and V). The fused variant copies a
// token's K and V rows in one launch with both rows' loads in flight together; the separate
// variant is launched once for K and once for V.
#ifndef GPUPROF_KERNELS_STORE_KERNEL_CUH_
#define GPUPROF_KERNELS_STORE_KERNEL_CUH_

#include "kernels/copy/copy_common.cuh"
#include "kernels/copy/copy_kernel_params.h"

// Named, not anonymous: see index_kernel.cuh.
namespace gpuprof::kernels::jit {

template <int kRowBytes, int kNumSplits, int kVecBytes, int kNumThreads, int kMaxOccupancy,
          bool kUsePdl, bool kFusedKv>
__global__ void __launch_bounds__(kNumThreads, kMaxOccupancy)
    StoreKernel(const __grid_constant__ StoreKernelParams params) {
  constexpr int kSliceBytes = kRowBytes / kNumSplits;
  const device::WarpRowSlice slice =
      device::BeginWarpRowSlice<kRowBytes, kNumSplits, kVecBytes, kNumThreads, kMaxOccupancy,
                                kUsePdl>();
  if (slice.token >= params.num_tokens) return;
  const int64_t token = slice.token, slice_offset = slice.offset;
  const int lane = slice.lane;
  const int64_t source_offset = token * kRowBytes + slice_offset;
  const int64_t cache_offset = static_cast<int64_t>(params.slots[token]) * kRowBytes + slice_offset;
  if constexpr (kFusedKv) {
    const char* const sources[2] = {static_cast<const char*>(params.k) + source_offset,
                                    static_cast<const char*>(params.v) + source_offset};
    char* const destinations[2] = {static_cast<char*>(params.k_cache) + cache_offset,
                                   static_cast<char*>(params.v_cache) + cache_offset};
    device::WarpCopySlices<kSliceBytes, kVecBytes, 2>(sources, destinations, lane);
  } else {
    const char* const sources[1] = {static_cast<const char*>(params.k) + source_offset};
    char* const destinations[1] = {static_cast<char*>(params.k_cache) + cache_offset};
    device::WarpCopySlices<kSliceBytes, kVecBytes, 1>(sources, destinations, lane);
  }
}

}  // namespace gpuprof::kernels::jit

#endif  // GPUPROF_KERNELS_STORE_KERNEL_CUH_
