// gpuprof's own gather (kernels/copy/index_kernel.cuh, unmasked, without PDL) written against
// the index contract, so that "a submitted kernel identical to ours measures the same" can be
// checked: kNumSplits warps share a row (each copies one slice, lane-strided with the widest
// vector that divides the slice, eight loads in flight per lane), blocks of
// GPUPROF_BLOCK_THREADS threads with __launch_bounds__(threads, 1).
//
// Our gather's launch for a shape is in its result's kernel_config (threads, num_splits);
// submit with the same: --block-threads THREADS --items-per-block THREADS/32/SPLITS
// --kernel-option -DBUILTIN_NUM_SPLITS=SPLITS. For hidden 7168 bf16 at 16Ki tokens on an H100
// ours runs 128 threads and one split:
//
//   gpuprof submit index --kernel-file index_builtin_gather.cu --kernel-name builtin_gather \
//       --block-threads 128 --items-per-block 4 --hidden 7168 --tokens 16384
#include <gpuprof/contract.h>

#ifndef BUILTIN_NUM_SPLITS
#define BUILTIN_NUM_SPLITS 1
#endif

namespace {

constexpr int kWarpSize = 32;
constexpr int kMaxLoadsInFlight = 8;
constexpr int kRowBytes = GPUPROF_ROW_BYTES;
constexpr int kNumSplits = BUILTIN_NUM_SPLITS;
constexpr int kNumThreads = GPUPROF_BLOCK_THREADS;
constexpr int kWarpsPerBlock = kNumThreads / kWarpSize;
constexpr int kSliceBytes = kRowBytes / kNumSplits;
constexpr int kVecBytes = kSliceBytes % 16 == 0 ? 16 : kSliceBytes % 8 == 0 ? 8
                          : kSliceBytes % 4 == 0  ? 4
                          : kSliceBytes % 2 == 0  ? 2
                                                  : 1;
static_assert(kRowBytes % kNumSplits == 0, "a row must split into equal slices");
static_assert(kWarpsPerBlock % kNumSplits == 0 &&
                  GPUPROF_ITEMS_PER_BLOCK == kWarpsPerBlock / kNumSplits,
              "our grid: items_per_block = block_threads / 32 / BUILTIN_NUM_SPLITS");

template <int kBytes>
struct VectorOf;
template <>
struct VectorOf<16> {
  struct alignas(16) type {
    unsigned int x, y, z, w;
  };
};
template <>
struct VectorOf<8> {
  struct alignas(8) type {
    unsigned int x, y;
  };
};
template <>
struct VectorOf<4> {
  using type = unsigned int;
};
template <>
struct VectorOf<2> {
  using type = unsigned short;
};
template <>
struct VectorOf<1> {
  using type = unsigned char;
};

template <int kBytes>
__device__ __forceinline__ typename VectorOf<kBytes>::type LoadOnce(const void* address) {
  typename VectorOf<kBytes>::type value;
  if constexpr (kBytes == 16) {
    asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(value.x), "=r"(value.y), "=r"(value.z), "=r"(value.w)
                 : "l"(address));
  } else if constexpr (kBytes == 8) {
    asm volatile("ld.global.nc.v2.u32 {%0, %1}, [%2];"
                 : "=r"(value.x), "=r"(value.y)
                 : "l"(address));
  } else {
    value = *static_cast<const typename VectorOf<kBytes>::type*>(address);
  }
  return value;
}

// WarpCopySlices<kSliceBytes, kVecBytes, 1> of kernels/copy/copy_common.cuh.
__device__ __forceinline__ void WarpCopySlice(const char* source, char* destination, int lane) {
  using Vector = typename VectorOf<kVecBytes>::type;
  constexpr int kVectors = kSliceBytes / kVecBytes;
  constexpr int kVectorsPerLane = (kVectors + kWarpSize - 1) / kWarpSize;
  constexpr int kPerRound = kVectorsPerLane < kMaxLoadsInFlight ? kVectorsPerLane : kMaxLoadsInFlight;
  for (int round = 0; round < kVectorsPerLane; round += kPerRound) {
    Vector buffer[kPerRound];
#pragma unroll
    for (int u = 0; u < kPerRound; ++u) {
      const int vector = (round + u) * kWarpSize + lane;
      if (vector < kVectors) buffer[u] = LoadOnce<kVecBytes>(source + vector * kVecBytes);
    }
#pragma unroll
    for (int u = 0; u < kPerRound; ++u) {
      const int vector = (round + u) * kWarpSize + lane;
      if (vector < kVectors) {
        *reinterpret_cast<Vector*>(destination + vector * kVecBytes) = buffer[u];
      }
    }
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kNumThreads, 1)
    builtin_gather(const __grid_constant__ gpuprof_index_params p) {
  const long long warp =
      static_cast<long long>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  const long long token = warp / kNumSplits;
  const long long slice_offset = (warp % kNumSplits) * kSliceBytes;
  if (token >= p.num_tokens) return;
  const int lane = threadIdx.x % kWarpSize;
  const long long row = p.ids[token];
  WarpCopySlice(static_cast<const char*>(p.table) + row * kRowBytes + slice_offset,
                static_cast<char*>(p.out) + token * kRowBytes + slice_offset, lane);
}
