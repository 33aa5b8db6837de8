// Fast comparison of token sequences: the inner loop of radix-cache prefix
// matching, where a request's tokens are compared against cached edges.

#ifndef GPUPROF_RADIX_TOKEN_COMPARE_H_
#define GPUPROF_RADIX_TOKEN_COMPARE_H_

#include <cstddef>
#include <cstdint>

namespace gpuprof::radix {

// Returns the number of leading positions i in [0, n) for which a[i] == b[i],
// stopping at the first mismatch. Both arrays must hold at least n tokens.
// Uses AVX2 when the running CPU supports it, else SSE2 (x86-64 baseline),
// else a scalar loop, so the same binary runs on any x86-64 machine.
size_t CommonPrefixLength(const int32_t* a, const int32_t* b, size_t n);

// Plain element-by-element loop; the reference the vector paths are tested
// against.
size_t CommonPrefixLengthScalar(const int32_t* a, const int32_t* b, size_t n);

// The individual vector paths, exposed so tests can exercise each one no
// matter which one the dispatcher picks. On non-x86-64 builds they forward to
// the scalar loop. CommonPrefixLengthAvx2 must only be called when
// CpuSupportsAvx2() is true.
size_t CommonPrefixLengthSse2(const int32_t* a, const int32_t* b, size_t n);
size_t CommonPrefixLengthAvx2(const int32_t* a, const int32_t* b, size_t n);

// True when the running CPU (not the compiler target) can execute AVX2.
bool CpuSupportsAvx2();

}  // namespace gpuprof::radix

#endif  // GPUPROF_RADIX_TOKEN_COMPARE_H_
