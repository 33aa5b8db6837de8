#include "radix/token_compare.h"

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#define GPUPROF_RADIX_HAVE_X86_64 1
#else
#define GPUPROF_RADIX_HAVE_X86_64 0
#endif

namespace gpuprof::radix {
namespace {

#if GPUPROF_RADIX_HAVE_X86_64

// Index of the first mismatching int32 lane given a byte-granular movemask of
// lane equality (4 mask bits per lane). The mask must have a zero bit within
// its vector's width, i.e. there is a mismatch.
inline size_t FirstMismatchLane(uint32_t equal_mask) {
  return static_cast<size_t>(__builtin_ctz(~equal_mask)) / sizeof(int32_t);
}

// Compares 4 tokens at a time. SSE2 is part of the x86-64 baseline, so no
// target attribute or runtime check is needed. Returns the index of the first
// mismatch, or the end of the last whole block when every block matched.
size_t Sse2Blocks(const int32_t* a, const int32_t* b, size_t n) {
  constexpr size_t kLanes = 4;
  constexpr uint32_t kAllEqual = 0xFFFFu;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m128i va = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i));
    const __m128i vb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i));
    const uint32_t mask =
        static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi32(va, vb)));
    if (mask != kAllEqual) return i + FirstMismatchLane(mask);
  }
  return i;
}

// Compares 16 tokens per iteration (two 8-lane vectors combined so the loop
// has a single branch), then 8 at a time. Same return contract as Sse2Blocks.
__attribute__((target("avx2"))) size_t Avx2Blocks(const int32_t* a,
                                                  const int32_t* b, size_t n) {
  constexpr size_t kLanes = 8;
  constexpr uint32_t kAllEqual = 0xFFFFFFFFu;
  size_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const __m256i a0 =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i b0 =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    const __m256i a1 =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i + kLanes));
    const __m256i b1 =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i + kLanes));
    const __m256i eq0 = _mm256_cmpeq_epi32(a0, b0);
    const __m256i eq1 = _mm256_cmpeq_epi32(a1, b1);
    const uint32_t both =
        static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_and_si256(eq0, eq1)));
    if (both != kAllEqual) {
      const uint32_t mask0 = static_cast<uint32_t>(_mm256_movemask_epi8(eq0));
      if (mask0 != kAllEqual) return i + FirstMismatchLane(mask0);
      const uint32_t mask1 = static_cast<uint32_t>(_mm256_movemask_epi8(eq1));
      return i + kLanes + FirstMismatchLane(mask1);
    }
  }
  for (; i + kLanes <= n; i += kLanes) {
    const __m256i va =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i vb =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    const uint32_t mask =
        static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi32(va, vb)));
    if (mask != kAllEqual) return i + FirstMismatchLane(mask);
  }
  return i;
}

#endif  // GPUPROF_RADIX_HAVE_X86_64

// Finishes a comparison that a vector path proved equal up to `start`. When
// the vector path stopped on a mismatch this returns `start` immediately.
inline size_t ScalarFrom(const int32_t* a, const int32_t* b, size_t start,
                         size_t n) {
  size_t i = start;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

using CompareFunction = size_t (*)(const int32_t*, const int32_t*, size_t);

CompareFunction ResolveCompareFunction() {
#if GPUPROF_RADIX_HAVE_X86_64
  return CpuSupportsAvx2() ? &CommonPrefixLengthAvx2 : &CommonPrefixLengthSse2;
#else
  return &CommonPrefixLengthScalar;
#endif
}

}  // namespace

size_t CommonPrefixLengthScalar(const int32_t* a, const int32_t* b, size_t n) {
  return ScalarFrom(a, b, 0, n);
}

size_t CommonPrefixLengthSse2(const int32_t* a, const int32_t* b, size_t n) {
#if GPUPROF_RADIX_HAVE_X86_64
  return ScalarFrom(a, b, Sse2Blocks(a, b, n), n);
#else
  return ScalarFrom(a, b, 0, n);
#endif
}

size_t CommonPrefixLengthAvx2(const int32_t* a, const int32_t* b, size_t n) {
#if GPUPROF_RADIX_HAVE_X86_64
  // Fewer than 8 tokens remain after the AVX2 blocks (or a mismatch was
  // found, which the SSE2 path re-detects in its first block).
  const size_t done = Avx2Blocks(a, b, n);
  return done + CommonPrefixLengthSse2(a + done, b + done, n - done);
#else
  return ScalarFrom(a, b, 0, n);
#endif
}

bool CpuSupportsAvx2() {
#if GPUPROF_RADIX_HAVE_X86_64
  // Runs once; __builtin_cpu_init makes the check safe even if the first
  // caller is a static initializer.
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return supported;
#else
  return false;
#endif
}

size_t CommonPrefixLength(const int32_t* a, const int32_t* b, size_t n) {
  // Short edges are common near the leaves of a radix tree; the scalar loop
  // beats the indirect call plus vector setup there.
  if (n < 8) return ScalarFrom(a, b, 0, n);
  static const CompareFunction compare = ResolveCompareFunction();
  return compare(a, b, n);
}

}  // namespace gpuprof::radix
