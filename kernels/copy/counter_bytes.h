// The inputs of the copy kernels as a counter-based stream: byte b of the stream for `seed` is
// byte b % 8 (little-endian) of CounterWord(seed, b / 8). Any byte can be computed on its own,
// so the GPU fills a table in place and a reference recomputes just the bytes it checks,
// without the whole table ever living in host memory. (SplitMix64's output function over the
// counter: the stream equals SplitMix64 seeded with `seed`.)
#ifndef GPUPROF_KERNELS_COPY_COUNTER_BYTES_H_
#define GPUPROF_KERNELS_COPY_COUNTER_BYTES_H_

#include <cstdint>

#if defined(__CUDACC__)
#define GPUPROF_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GPUPROF_HOST_DEVICE inline
#endif

namespace gpuprof::kernels {

GPUPROF_HOST_DEVICE uint64_t CounterWord(uint64_t seed, uint64_t word_index) {
  uint64_t z = seed + (word_index + 1) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The `width` (1, 2, 4 or 8) bytes of the stream at `offset`, which must be a multiple of
// `width`, as a little-endian integer.
GPUPROF_HOST_DEVICE uint64_t CounterBytesAt(uint64_t seed, uint64_t offset, int width) {
  const uint64_t word = CounterWord(seed, offset / 8);
  const int shift = static_cast<int>(offset % 8) * 8;
  return width == 8 ? word : (word >> shift) & ((uint64_t{1} << (8 * width)) - 1);
}

}  // namespace gpuprof::kernels

#undef GPUPROF_HOST_DEVICE

#endif  // GPUPROF_KERNELS_COPY_COUNTER_BYTES_H_
