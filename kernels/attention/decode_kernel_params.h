// What the decode kernels (decode.cu on CUDA cores, decode_mma.cu on tensor cores) receive:
// device pointers, the split and the strides of the paged layout. Internal to the decode target.
#ifndef GPUPROF_KERNELS_ATTENTION_DECODE_KERNEL_PARAMS_H_
#define GPUPROF_KERNELS_ATTENTION_DECODE_KERNEL_PARAMS_H_

#include <cstdint>

namespace gpuprof::attention {

struct DecodeKernelParams {
  const void* q;
  const void* k_cache;
  const void* v_cache;
  void* o;
  float* lse;
  float* partial_o;    // [num_splits][total_q][num_qo_heads][head_dim], normalised per split
  float* partial_lse;  // [num_splits][total_q][num_qo_heads], base-2 log-sum-exp
  const int32_t* q_indptr;
  const int32_t* kv_lens;
  const int32_t* page_indptr;
  const int32_t* page_indices;
  int num_qo_heads;
  int group_size;
  int log2_page_size;
  int num_splits;
  int row_chunks;
  int64_t total_q;
  int64_t kv_row_stride;
  float scale_log2;
  bool causal;
  // Splits by HalvingSplitBegin, listed slowest in the grid (blocks split-major), instead of
  // even and fastest (the tensor-core kernels only).
  bool halving_splits;
};

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_DECODE_KERNEL_PARAMS_H_
