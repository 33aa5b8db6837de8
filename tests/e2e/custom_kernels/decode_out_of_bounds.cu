// Right for every element of o, and then one write past its end: the guard bytes after the
// output must catch it.
#include <gpuprof/contract.h>

#define GROUP GPUPROF_GROUP_SIZE
#define HEAD_DIM GPUPROF_HEAD_DIM

__device__ float ToFloat(unsigned short bits) {
#if GPUPROF_DTYPE_BF16
  return __uint_as_float(static_cast<unsigned int>(bits) << 16);
#else
  float value;
  asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(bits));
  return value;
#endif
}

__device__ unsigned short FromFloat(float value) {
#if GPUPROF_DTYPE_BF16
  const unsigned int bits = __float_as_uint(value);
  return static_cast<unsigned short>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
#else
  unsigned short bits;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(value));
  return bits;
#endif
}

// Plain decode: each thread computes whole output elements (query head g, element d) of its
// block's items, reading every K row in full; slow, and simple enough to be obviously right.
__device__ void PlainDecode(const gpuprof_decode_params& p, bool scaled) {
  const unsigned short* q = static_cast<const unsigned short*>(p.q);
  const unsigned short* k = static_cast<const unsigned short*>(p.k_cache);
  const unsigned short* v = static_cast<const unsigned short*>(p.v_cache);
  unsigned short* o = static_cast<unsigned short*>(p.o);
  const int items = p.batch_size * p.num_kv_heads;
  for (int item = blockIdx.x * GPUPROF_ITEMS_PER_BLOCK;
       item < (blockIdx.x + 1) * GPUPROF_ITEMS_PER_BLOCK && item < items; ++item) {
    const int seq = item / p.num_kv_heads;
    const int kv_head = item % p.num_kv_heads;
    const int* pages = p.page_indices + p.page_indptr[seq];
    for (int out = threadIdx.x; out < GROUP * HEAD_DIM; out += blockDim.x) {
      const long long row =
          static_cast<long long>(seq) * p.num_qo_heads + kv_head * GROUP + out / HEAD_DIM;
      const int d = out % HEAD_DIM;
      float max = -__int_as_float(0x7f800000), sum = 0.0f, acc = 0.0f;
      for (int j = 0; j < p.kv_lens[seq]; ++j) {
        const long long at = pages[j / GPUPROF_PAGE_SIZE] * p.kv_page_stride +
                             (j % GPUPROF_PAGE_SIZE) * p.kv_token_stride +
                             static_cast<long long>(kv_head) * HEAD_DIM;
        float score = 0.0f;
        for (int e = 0; e < HEAD_DIM; ++e)
          score += ToFloat(q[row * HEAD_DIM + e]) * ToFloat(k[at + e]);
        if (scaled) score *= p.scale;
        const float new_max = fmaxf(max, score);
        const float correction = expf(max - new_max);
        const float weight = expf(score - new_max);
        sum = sum * correction + weight;
        acc = acc * correction + weight * ToFloat(v[at + d]);
        max = new_max;
      }
      o[row * HEAD_DIM + d] = FromFloat(acc / sum);
    }
  }
}

extern "C" __global__ void decode_out_of_bounds(const __grid_constant__ gpuprof_decode_params p) {
  PlainDecode(p, /*scaled=*/true);
  // One element too many after the last sequence's last head.
  if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) {
    const long long elements = static_cast<long long>(p.batch_size) * p.num_qo_heads * p.head_dim;
    static_cast<unsigned short*>(p.o)[elements] = 0x4242;
  }
}
