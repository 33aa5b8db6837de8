// Embedding gather: out[t, :] = table[ids[t], :]. One warp copies one slice of a row;
// kNumSplits warps share a row so that few tokens still spread over the GPU. The masked
// variant serves a vocabulary sharded over tensor-parallel ranks: ids outside
// [vocab_start, vocab_end) produce zero rows.
#ifndef GPUPROF_KERNELS_INDEX_KERNEL_CUH_
#define GPUPROF_KERNELS_INDEX_KERNEL_CUH_

#include "kernels/copy/copy_common.cuh"
#include "kernels/copy/copy_kernel_params.h"

// NVRTC-compiled kernels are looked up by mangled name in the cubin's symbol table, where a
// kernel in an anonymous namespace is a local symbol; so they live in a named namespace.
namespace gpuprof::kernels::jit {

template <int kRowBytes, int kNumSplits, int kVecBytes, int kNumThreads, int kMaxOccupancy,
          bool kUsePdl, bool kMasked>
__global__ void __launch_bounds__(kNumThreads, kMaxOccupancy)
    IndexKernel(const __grid_constant__ IndexKernelParams params) {
  constexpr int kSliceBytes = kRowBytes / kNumSplits;
  const device::WarpRowSlice slice =
      device::BeginWarpRowSlice<kRowBytes, kNumSplits, kVecBytes, kNumThreads, kMaxOccupancy,
                                kUsePdl>();
  if (slice.token >= params.num_tokens) return;
  const int64_t token = slice.token, slice_offset = slice.offset;
  const int lane = slice.lane;
  const int32_t id = params.ids[token];
  char* destination = static_cast<char*>(params.out) + token * kRowBytes + slice_offset;
  int64_t row = id;
  if constexpr (kMasked) {
    if (id < params.vocab_start || id >= params.vocab_end) {
      device::WarpZeroSlice<kSliceBytes, kVecBytes>(destination, lane);
      return;
    }
    row = id - params.vocab_start;
  }
  const char* const sources[1] = {static_cast<const char*>(params.table) + row * kRowBytes +
                                  slice_offset};
  char* const destinations[1] = {destination};
  device::WarpCopySlices<kSliceBytes, kVecBytes, 1>(sources, destinations, lane);
}

}  // namespace gpuprof::kernels::jit

#endif  // GPUPROF_KERNELS_INDEX_KERNEL_CUH_
