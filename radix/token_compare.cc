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

// Outcome of comparing whole vector blocks: either the first mismatch was
// found at `position`, or every whole block matched and `position` is where
// the remainder (shorter than one block) starts.
struct BlockScan {
  size_t position;
  bool found_mismatch;
};

inline size_t ScalarFrom(const int32_t* a, const int32_t* b, size_t start, size_t n) {
  size_t i = start;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

#if GPUPROF_RADIX_HAVE_X86_64

// Index of the first mismatching int32 lane given a byte-granular movemask of
// lane equality (4 mask bits per lane). The mask must have a zero bit within
// its vector's width, i.e. there is a mismatch.
inline size_t FirstMismatchLane(uint32_t equal_mask) {
  return static_cast<size_t>(__builtin_ctz(~equal_mask)) / sizeof(int32_t);
}

// Compares 4 tokens at a time. SSE2 is part of the x86-64 baseline, so no
// target attribute or runtime check is needed.
BlockScan Sse2Blocks(const int32_t* a, const int32_t* b, size_t n) {
  constexpr size_t kLanes = 4;
  constexpr uint32_t kAllEqual = 0xFFFFu;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m128i va = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i));
    const __m128i vb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i));
    const auto mask = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi32(va, vb)));
    if (mask != kAllEqual) return {i + FirstMismatchLane(mask), true};
  }
  return {i, false};
}

// Compares 16 tokens per iteration (two 8-lane vectors combined so the loop
// has a single branch), then 8 at a time.
__attribute__((target("avx2"))) BlockScan Avx2Blocks(const int32_t* a, const int32_t* b, size_t n) {
  constexpr size_t kLanes = 8;
  constexpr uint32_t kAllEqual = 0xFFFFFFFFu;
  size_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i + kLanes));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i + kLanes));
    const __m256i equal0 = _mm256_cmpeq_epi32(a0, b0);
    const __m256i equal1 = _mm256_cmpeq_epi32(a1, b1);
    const auto both = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_and_si256(equal0, equal1)));
    if (both != kAllEqual) {
      const auto mask0 = static_cast<uint32_t>(_mm256_movemask_epi8(equal0));
      if (mask0 != kAllEqual) return {i + FirstMismatchLane(mask0), true};
      const auto mask1 = static_cast<uint32_t>(_mm256_movemask_epi8(equal1));
      return {i + kLanes + FirstMismatchLane(mask1), true};
    }
  }
  for (; i + kLanes <= n; i += kLanes) {
    const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    const auto mask = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi32(va, vb)));
    if (mask != kAllEqual) return {i + FirstMismatchLane(mask), true};
  }
  return {i, false};
}

#endif  // GPUPROF_RADIX_HAVE_X86_64

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
  const BlockScan scan = Sse2Blocks(a, b, n);
  if (scan.found_mismatch) return scan.position;
  return ScalarFrom(a, b, scan.position, n);  // Fewer than 4 tokens left.
#else
  return ScalarFrom(a, b, 0, n);
#endif
}

size_t CommonPrefixLengthAvx2(const int32_t* a, const int32_t* b, size_t n) {
#if GPUPROF_RADIX_HAVE_X86_64
  const BlockScan scan = Avx2Blocks(a, b, n);
  if (scan.found_mismatch) return scan.position;
  // Fewer than 8 tokens left: one SSE2 block may still fit before the tail.
  return scan.position +
         CommonPrefixLengthSse2(a + scan.position, b + scan.position, n - scan.position);
#else
  return ScalarFrom(a, b, 0, n);
#endif
}

bool CpuSupportsAvx2() {
#if GPUPROF_RADIX_HAVE_X86_64
  // Evaluated once. __builtin_cpu_init makes the check valid even when the
  // first caller is a static initializer that runs before the runtime's own.
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
  // Short edges are common near the leaves of a radix tree; a plain loop
  // beats the indirect call and vector setup there.
  if (n < 8) return ScalarFrom(a, b, 0, n);
  static const CompareFunction compare = ResolveCompareFunction();
  return compare(a, b, n);
}

}  // namespace gpuprof::radix
