// What both prefill kernels (the portable one in prefill.cu, the Hopper one in prefill_sm90.cu)
// receive: device pointers and the strides of the paged layout. Internal to the prefill target.
#ifndef GPUPROF_KERNELS_ATTENTION_PREFILL_KERNEL_PARAMS_H_
#define GPUPROF_KERNELS_ATTENTION_PREFILL_KERNEL_PARAMS_H_

#include <cstdint>

namespace gpuprof::attention {

struct PrefillKernelParams {
  const void* q;
  const void* k_cache;
  const void* v_cache;
  void* o;
  float* lse;
  const int32_t* q_indptr;
  const int32_t* kv_lens;
  const int32_t* page_indptr;
  const int32_t* page_indices;
  int num_qo_heads;
  int group_size;
  int log2_page_size;
  int64_t q_row_stride;   // elements between consecutive tokens of Q and O
  int64_t kv_row_stride;  // elements between consecutive KV slots
  float scale_log2;       // softmax scale * log2(e): the softmax runs in base 2 (fp8: times the
                          // Q and K dequantisation scales)
  float v_scale;          // multiplies O: V's dequantisation scale (fp8), else 1
  // Hopper head_dim 64 without a causal mask, where the last wave of blocks is short: the
  // blocks from linear index whole_tiles on return at once (0: none do), and a second launch
  // in clusters of two runs those tiles, each cluster one tile, each block half its KV tiles
  // (linear tile whole_tiles + blockIdx.x / 2 of a grid with split_q_tiles query tiles).
  int whole_tiles;
  int split_q_tiles;
  bool tiles_fastest;     // without a causal mask: blockIdx.x indexes the query tile and
                          // blockIdx.y the head, so that the blocks resident at once share KV
                          // heads (for K/V too large for the L2); else the other way round
};

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_PREFILL_KERNEL_PARAMS_H_
