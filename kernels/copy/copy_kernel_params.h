// Parameters of the index (embedding gather) and store (KV-cache scatter) kernels. Shared by
// the host and the NVRTC-compiled device code, so it is plain C++: no CUDA types and no
// standard headers inside NVRTC (which has none).
#ifndef GPUPROF_KERNELS_COPY_COPY_KERNEL_PARAMS_H_
#define GPUPROF_KERNELS_COPY_COPY_KERNEL_PARAMS_H_

#ifdef __CUDACC_RTC__
typedef int int32_t;
typedef long long int64_t;
#else
#include <cstdint>
#endif

namespace gpuprof::kernels {

// out[t, :] = table[ids[t] - vocab_start, :] for ids in [vocab_start, vocab_end); rows outside
// the range read as zeros when the masked variant runs (a vocabulary sharded over TP ranks).
// The unmasked variant ignores the range.
struct IndexKernelParams {
  const void* table;   // [table_rows, row_bytes]
  const int32_t* ids;  // [num_tokens]
  void* out;           // [num_tokens, row_bytes]
  int64_t num_tokens;
  int32_t vocab_start;
  int32_t vocab_end;
};

// k_cache[slots[t], :] = k[t, :] and, for the fused variant, v_cache[slots[t], :] = v[t, :].
// A row is one token's num_kv_heads * head_dim elements; a page of page_size slots is
// page_size consecutive rows, so paging shows only in which slots are chosen.
struct StoreKernelParams {
  const void* k;         // [num_tokens, row_bytes]
  const void* v;         // fused only
  void* k_cache;         // [cache_slots, row_bytes]
  void* v_cache;         // fused only
  const int32_t* slots;  // [num_tokens], distinct
  int64_t num_tokens;
};


}  // namespace gpuprof::kernels

#endif  // GPUPROF_KERNELS_COPY_COPY_KERNEL_PARAMS_H_
