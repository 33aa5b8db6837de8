// An embedding gather under gpuprof's index contract (docs/custom-kernels.md):
//   out[t, :] = table[ids[t], :]
// Each warp copies whole rows with the widest vector that divides a row, issuing up to eight
// loads per lane before their stores so that enough requests are in flight to cover DRAM
// latency. The block's warps share its items_per_block tokens, so any launch shape is right;
// one token per warp is the fast one:
//
//   gpuprof submit index --kernel-file index_gather.cu --kernel-name index_gather \
//       --block-threads 256 --items-per-block 8 --hidden 7168 --tokens 16384
//
// The row size and launch shape are compile-time constants (the -D macros gpuprof passes), so
// the loops unroll and no division is done at run time.
#include <gpuprof/contract.h>

#if !defined(GPUPROF_ROW_BYTES) || !defined(GPUPROF_BLOCK_THREADS)
#error "compiled by gpuprof, which defines the shape macros"
#endif

namespace {

constexpr int kWarpSize = 32;
constexpr int kRowBytes = GPUPROF_ROW_BYTES;
constexpr int kWarpsPerBlock = GPUPROF_BLOCK_THREADS / kWarpSize;
constexpr int kTokensPerBlock = GPUPROF_ITEMS_PER_BLOCK;
constexpr int kVecBytes = kRowBytes % 16 == 0 ? 16 : kRowBytes % 8 == 0 ? 8 : kRowBytes % 4 == 0 ? 4
                                                                            : kRowBytes % 2 == 0 ? 2
                                                                                                 : 1;
constexpr int kVectors = kRowBytes / kVecBytes;
constexpr int kVectorsPerLane = (kVectors + kWarpSize - 1) / kWarpSize;
constexpr int kLoadsInFlight = kVectorsPerLane < 8 ? kVectorsPerLane : 8;

template <int kBytes>
struct Vector;
template <>
struct Vector<16> {
  struct alignas(16) type {
    unsigned int x, y, z, w;
  };
};
template <>
struct Vector<8> {
  struct alignas(8) type {
    unsigned int x, y;
  };
};
template <>
struct Vector<4> {
  using type = unsigned int;
};
template <>
struct Vector<2> {
  using type = unsigned short;
};
template <>
struct Vector<1> {
  using type = unsigned char;
};
using Vec = Vector<kVecBytes>::type;

// The table is read once per launch: the read-only path (an L1::no_allocate hint made it slower).
__device__ __forceinline__ Vec LoadOnce(const Vec* address) {
  Vec value;
  if constexpr (kVecBytes == 16) {
    asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(value.x), "=r"(value.y), "=r"(value.z), "=r"(value.w)
                 : "l"(address));
  } else {
    value = *address;
  }
  return value;
}

}  // namespace

static_assert(GPUPROF_BLOCK_THREADS % kWarpSize == 0, "a block is whole warps");

extern "C" __global__ void __launch_bounds__(GPUPROF_BLOCK_THREADS)
    index_gather(const __grid_constant__ gpuprof_index_params p) {
  const int lane = threadIdx.x % kWarpSize;
  const long long first = static_cast<long long>(blockIdx.x) * kTokensPerBlock;
  for (int item = threadIdx.x / kWarpSize; item < kTokensPerBlock; item += kWarpsPerBlock) {
    const long long token = first + item;
    if (token >= p.num_tokens) return;
    const Vec* source =
        reinterpret_cast<const Vec*>(static_cast<const char*>(p.table) +
                                     static_cast<long long>(p.ids[token]) * kRowBytes);
    Vec* destination = reinterpret_cast<Vec*>(static_cast<char*>(p.out) + token * kRowBytes);
    for (int round = 0; round < kVectorsPerLane; round += kLoadsInFlight) {
      Vec buffer[kLoadsInFlight];
#pragma unroll
      for (int u = 0; u < kLoadsInFlight; ++u) {
        const int vector = (round + u) * kWarpSize + lane;
        if (vector < kVectors) buffer[u] = LoadOnce(source + vector);
      }
#pragma unroll
      for (int u = 0; u < kLoadsInFlight; ++u) {
        const int vector = (round + u) * kWarpSize + lane;
        if (vector < kVectors) destination[vector] = buffer[u];
      }
    }
  }
}
