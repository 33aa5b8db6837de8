// A KV-cache scatter under gpuprof's store contract (docs/custom-kernels.md):
//   k_cache[slots[t], :] = k[t, :]   and   v_cache[slots[t], :] = v[t, :]
// in one launch. Each warp moves one token's K and V rows with the widest vector that divides
// a row, loading both rows' vectors before storing them, so that twice the requests are in
// flight. One token per warp:
//
//   gpuprof submit store --kernel-file store_scatter.cu --kernel-name store_scatter \
//       --block-threads 256 --items-per-block 8 --tokens 16384 --kv-heads 8 --head-dim 128
//
// The row size and launch shape are compile-time constants (the -D macros gpuprof passes).
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
// Two rows (K and V) per round, eight loads in flight per lane at most.
constexpr int kPerRound = kVectorsPerLane < 4 ? kVectorsPerLane : 4;

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

// K and V are read once: the read-only path (an L1::no_allocate hint made it slower).
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
    store_scatter(const __grid_constant__ gpuprof_store_params p) {
  const int lane = threadIdx.x % kWarpSize;
  const long long first = static_cast<long long>(blockIdx.x) * kTokensPerBlock;
  for (int item = threadIdx.x / kWarpSize; item < kTokensPerBlock; item += kWarpsPerBlock) {
    const long long token = first + item;
    if (token >= p.num_tokens) return;
    const long long slot = p.slots[token];
    const Vec* k = reinterpret_cast<const Vec*>(static_cast<const char*>(p.k) + token * kRowBytes);
    const Vec* v = reinterpret_cast<const Vec*>(static_cast<const char*>(p.v) + token * kRowBytes);
    Vec* k_cache = reinterpret_cast<Vec*>(static_cast<char*>(p.k_cache) + slot * kRowBytes);
    Vec* v_cache = reinterpret_cast<Vec*>(static_cast<char*>(p.v_cache) + slot * kRowBytes);
    for (int round = 0; round < kVectorsPerLane; round += kPerRound) {
      Vec k_buffer[kPerRound];
      Vec v_buffer[kPerRound];
#pragma unroll
      for (int u = 0; u < kPerRound; ++u) {
        const int vector = (round + u) * kWarpSize + lane;
        if (vector < kVectors) {
          k_buffer[u] = LoadOnce(k + vector);
          v_buffer[u] = LoadOnce(v + vector);
        }
      }
#pragma unroll
      for (int u = 0; u < kPerRound; ++u) {
        const int vector = (round + u) * kWarpSize + lane;
        if (vector < kVectors) {
          k_cache[vector] = k_buffer[u];
          v_cache[vector] = v_buffer[u];
        }
      }
    }
  }
}
