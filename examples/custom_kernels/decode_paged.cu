// Paged attention decode for gpuprof's decode contract (docs/custom-kernels.md, "Attention
// decode"): a worked example, correct for every shape the contract allows and fast enough to
// compare with ours.
//
//   gpuprof submit attention --phase decode --batch 32 --kv-len 4096 --heads 32 --kv-heads 8 \
//       --kernel-file decode_paged.cu --kernel-name decode_paged --block-threads 256
//
// One block per (sequence, KV head) item. HEAD_DIM / 8 threads share one K/V row, each holding
// a 16-byte slice of it (8 elements); the block reads BLOCK_THREADS / (HEAD_DIM / 8) rows side
// by side, UNROLL rows per thread loaded before their first use so that enough bytes are in
// flight. The GROUP query heads of the KV head live in registers, so each K/V row loaded
// serves all of them. Every row slot keeps its own online softmax in fp32 (base 2); at the end
// the slots are merged in shared memory, one query head at a time, so shared memory does not
// grow with the group. No headers beyond the contract: bf16 and fp16 are converted with bit
// operations and PTX. On an H200, bf16, batch 32 x 4096 tokens, 32/8 heads of 128: about
// 2.4 TB/s with 256 threads per block (1.5 TB/s with 128); ours splits long sequences over
// several blocks as well, which this one does not.
#include <gpuprof/contract.h>

#ifndef GPUPROF_DTYPE_BF16
#error "compile through gpuprof: GPUPROF_DTYPE_BF16 is set by the decode contract"
#endif

#define HEAD_DIM GPUPROF_HEAD_DIM
#define GROUP GPUPROF_GROUP_SIZE
#define THREADS GPUPROF_BLOCK_THREADS
#define THREADS_PER_ROW (HEAD_DIM / 8)
#define SLOTS (THREADS / THREADS_PER_ROW)
#define UNROLL 4
#define NEG_INFINITY (-__int_as_float(0x7f800000))

static_assert(HEAD_DIM % 8 == 0 && THREADS_PER_ROW <= 32, "head_dim: a multiple of 8 up to 256");
static_assert(THREADS % THREADS_PER_ROW == 0, "block_threads: a multiple of head_dim / 8");
static_assert((GPUPROF_PAGE_SIZE & (GPUPROF_PAGE_SIZE - 1)) == 0, "page_size: a power of two");

__device__ __forceinline__ float ToFloat(unsigned short bits) {
#if GPUPROF_DTYPE_BF16
  return __uint_as_float(static_cast<unsigned int>(bits) << 16);
#else
  float value;
  asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(bits));
  return value;
#endif
}

__device__ __forceinline__ unsigned short FromFloat(float value) {
#if GPUPROF_DTYPE_BF16
  const unsigned int bits = __float_as_uint(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN stays NaN
  // Round to nearest, ties to even.
  return static_cast<unsigned short>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
#else
  unsigned short bits;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(value));
  return bits;
#endif
}

// 16 bytes = 8 elements to floats.
__device__ __forceinline__ void Unpack(const uint4& bits, float (&out)[8]) {
  const unsigned int words[4] = {bits.x, bits.y, bits.z, bits.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = ToFloat(static_cast<unsigned short>(words[i] & 0xffffu));
    out[2 * i + 1] = ToFloat(static_cast<unsigned short>(words[i] >> 16));
  }
}

extern "C" __global__ void __launch_bounds__(THREADS)
    decode_paged(const __grid_constant__ gpuprof_decode_params p) {
  __shared__ float merge_max[SLOTS];
  __shared__ float merge_sum[SLOTS];
  __shared__ float merge_acc[SLOTS][HEAD_DIM];

  const int slot = threadIdx.x / THREADS_PER_ROW;
  const int lane = threadIdx.x % THREADS_PER_ROW;
  const int items = p.batch_size * p.num_kv_heads;
  const int first_item = blockIdx.x * GPUPROF_ITEMS_PER_BLOCK;

  for (int item = first_item; item < first_item + GPUPROF_ITEMS_PER_BLOCK && item < items; ++item) {
    const int seq = item / p.num_kv_heads;
    const int kv_head = item % p.num_kv_heads;
    const int kv_len = p.kv_lens[seq];
    const int* pages = p.page_indices + p.page_indptr[seq];
    const long long head_offset = static_cast<long long>(kv_head) * HEAD_DIM + lane * 8;

    // This thread's slice of the group's query rows, scaled into base 2.
    float q[GROUP][8];
#pragma unroll
    for (int g = 0; g < GROUP; ++g) {
      const long long row = static_cast<long long>(seq) * p.num_qo_heads + kv_head * GROUP + g;
      const uint4 bits = *reinterpret_cast<const uint4*>(static_cast<const unsigned short*>(p.q) +
                                                         row * HEAD_DIM + lane * 8);
      Unpack(bits, q[g]);
#pragma unroll
      for (int e = 0; e < 8; ++e) q[g][e] *= p.scale_log2;
    }

    float row_max[GROUP], row_sum[GROUP], acc[GROUP][8];
#pragma unroll
    for (int g = 0; g < GROUP; ++g) {
      row_max[g] = NEG_INFINITY;
      row_sum[g] = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] = 0.0f;
    }

    // Every thread runs the same iterations (the shuffles need the whole warp); slots past the
    // end load nothing and skip the update.
    for (int base = 0; base < kv_len; base += SLOTS * UNROLL) {
      uint4 k_bits[UNROLL], v_bits[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int j = base + u * SLOTS + slot;
        if (j < kv_len) {
          const long long offset = pages[j / GPUPROF_PAGE_SIZE] * p.kv_page_stride +
                                   (j % GPUPROF_PAGE_SIZE) * p.kv_token_stride + head_offset;
          k_bits[u] = __ldg(reinterpret_cast<const uint4*>(
              static_cast<const unsigned short*>(p.k_cache) + offset));
          v_bits[u] = __ldg(reinterpret_cast<const uint4*>(
              static_cast<const unsigned short*>(p.v_cache) + offset));
        } else {
          k_bits[u] = v_bits[u] = make_uint4(0, 0, 0, 0);
        }
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const bool valid = base + u * SLOTS + slot < kv_len;
        float k[8], v[8];
        Unpack(k_bits[u], k);
        Unpack(v_bits[u], v);
#pragma unroll
        for (int g = 0; g < GROUP; ++g) {
          float score = 0.0f;
#pragma unroll
          for (int e = 0; e < 8; ++e) score = fmaf(q[g][e], k[e], score);
#pragma unroll
          for (int mask = THREADS_PER_ROW / 2; mask > 0; mask /= 2) {
            score += __shfl_xor_sync(0xffffffffu, score, mask);
          }
          if (valid) {
            const float new_max = fmaxf(row_max[g], score);
            const float correction = exp2f(row_max[g] - new_max);  // 0 for the first row
            const float weight = exp2f(score - new_max);
            row_sum[g] = row_sum[g] * correction + weight;
#pragma unroll
            for (int e = 0; e < 8; ++e) acc[g][e] = fmaf(acc[g][e], correction, weight * v[e]);
            row_max[g] = new_max;
          }
        }
      }
    }

    // Merge the slots, one query head at a time.
#pragma unroll
    for (int g = 0; g < GROUP; ++g) {
      if (lane == 0) {
        merge_max[slot] = row_max[g];
        merge_sum[slot] = row_sum[g];
      }
      __syncthreads();
      float block_max = NEG_INFINITY;
      for (int s = 0; s < SLOTS; ++s) block_max = fmaxf(block_max, merge_max[s]);
      float block_sum = 0.0f;
      for (int s = 0; s < SLOTS; ++s) {
        block_sum += merge_sum[s] * exp2f(merge_max[s] - block_max);
      }
      const float factor = exp2f(row_max[g] - block_max);  // 0 for a slot that saw no row
#pragma unroll
      for (int e = 0; e < 8; ++e) merge_acc[slot][lane * 8 + e] = acc[g][e] * factor;
      __syncthreads();
      const long long row = static_cast<long long>(seq) * p.num_qo_heads + kv_head * GROUP + g;
      unsigned short* out = static_cast<unsigned short*>(p.o) + row * HEAD_DIM;
      for (int d = threadIdx.x; d < HEAD_DIM; d += THREADS) {
        float total = 0.0f;
        for (int s = 0; s < SLOTS; ++s) total += merge_acc[s][d];
        out[d] = FromFloat(total / block_sum);
      }
      __syncthreads();
    }
  }
}
