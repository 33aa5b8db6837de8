// Device helpers shared by the copy kernels (index, store): vector types, read-once loads,
// warp-cooperative row copies and programmatic dependent launch. Compiled by NVRTC only.
#ifndef GPUPROF_KERNELS_COPY_COMMON_CUH_
#define GPUPROF_KERNELS_COPY_COMMON_CUH_

#include "kernels/copy/copy_kernel_params.h"  // int64_t under NVRTC

namespace gpuprof::kernels::device {

inline constexpr int kWarpSize = 32;
// Vector loads a lane keeps in flight before its first store: enough independent requests to
// cover DRAM latency without spilling registers.
inline constexpr int kMaxLoadsInFlight = 8;

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

// Read-only data: the non-coherent path. No L1::no_allocate hint: on an H200 it made the
// gather 5-20% slower (L2-resident 3-32 KiB rows most, 64Ki tokens 4-6%) and the store 2-4%
// (docs/benchmarks/RESULTS.md, "The loads' L1 hint").
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

template <int kBytes>
__device__ __forceinline__ void Store(void* address, const typename VectorOf<kBytes>::type& value) {
  *static_cast<typename VectorOf<kBytes>::type*>(address) = value;
}

template <int kBytes>
__device__ __forceinline__ typename VectorOf<kBytes>::type ZeroVector() {
  typename VectorOf<kBytes>::type value{};
  return value;
}

// One warp copies kRows slices of kSliceBytes each (K and V of one token when kRows is 2),
// lane-strided so that each vector access of the warp is contiguous. All loads of a round are
// issued before its stores.
template <int kSliceBytes, int kVecBytes, int kRows>
__device__ __forceinline__ void WarpCopySlices(const char* const (&sources)[kRows],
                                               char* const (&destinations)[kRows], int lane) {
  static_assert(kSliceBytes % kVecBytes == 0, "a slice must be whole vectors");
  using Vector = typename VectorOf<kVecBytes>::type;
  constexpr int kVectors = kSliceBytes / kVecBytes;
  constexpr int kVectorsPerLane = (kVectors + kWarpSize - 1) / kWarpSize;
  constexpr int kRoundLimit = kMaxLoadsInFlight / kRows > 0 ? kMaxLoadsInFlight / kRows : 1;
  constexpr int kPerRound = kVectorsPerLane < kRoundLimit ? kVectorsPerLane : kRoundLimit;
  for (int round = 0; round < kVectorsPerLane; round += kPerRound) {
    Vector buffer[kRows][kPerRound];
#pragma unroll
    for (int u = 0; u < kPerRound; ++u) {
      const int vector = (round + u) * kWarpSize + lane;
      if (vector < kVectors) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          buffer[r][u] = LoadOnce<kVecBytes>(sources[r] + vector * kVecBytes);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kPerRound; ++u) {
      const int vector = (round + u) * kWarpSize + lane;
      if (vector < kVectors) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          Store<kVecBytes>(destinations[r] + vector * kVecBytes, buffer[r][u]);
        }
      }
    }
  }
}

template <int kSliceBytes, int kVecBytes>
__device__ __forceinline__ void WarpZeroSlice(char* destination, int lane) {
  constexpr int kVectors = kSliceBytes / kVecBytes;
  for (int vector = lane; vector < kVectors; vector += kWarpSize) {
    Store<kVecBytes>(destination + vector * kVecBytes, ZeroVector<kVecBytes>());
  }
}

// Programmatic dependent launch (sm_90+): wait for the grid this one depends on before
// touching memory it may write, and let the next grid start its prologue early. No-ops on
// older GPUs and when the kernel was built without PDL.
template <bool kUsePdl>
__device__ __forceinline__ void WaitForPrerequisiteGrid() {
  if constexpr (kUsePdl) {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  }
}

template <bool kUsePdl>
__device__ __forceinline__ void AllowDependentGridLaunch() {
  if constexpr (kUsePdl) {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
  }
}

// The prologue every row-copy kernel (index, store) shares: checks its shape, handles PDL, and
// says which token's row and which slice of it this warp copies (kNumSplits warps share a
// row, so that few tokens still spread over the GPU). `token` may be past the last one: the
// kernel returns then.
struct WarpRowSlice {
  int64_t token;
  int64_t offset;  // bytes into the row
  int lane;
};

template <int kRowBytes, int kNumSplits, int kVecBytes, int kNumThreads, int kMaxOccupancy,
          bool kUsePdl>
__device__ __forceinline__ WarpRowSlice BeginWarpRowSlice() {
  static_assert(
      kVecBytes == 1 || kVecBytes == 2 || kVecBytes == 4 || kVecBytes == 8 || kVecBytes == 16,
      "vector width must be 1, 2, 4, 8 or 16 bytes");
  static_assert(kNumThreads % kWarpSize == 0 && kNumThreads <= 1024,
                "a block is whole warps, at most 1024 threads");
  static_assert(kNumSplits >= 1 && kRowBytes % (kNumSplits * kVecBytes) == 0,
                "a row must split into equal slices of whole vectors");
  static_assert(kMaxOccupancy >= 1, "launch bounds need at least one block per SM");
  constexpr int kSliceBytes = kRowBytes / kNumSplits;
  constexpr int kWarpsPerBlock = kNumThreads / kWarpSize;

  WaitForPrerequisiteGrid<kUsePdl>();
  AllowDependentGridLaunch<kUsePdl>();
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  return WarpRowSlice{warp / kNumSplits, (warp % kNumSplits) * kSliceBytes,
                      static_cast<int>(threadIdx.x % kWarpSize)};
}

}  // namespace gpuprof::kernels::device

#endif  // GPUPROF_KERNELS_COPY_COMMON_CUH_
