// The contract between gpuprof and a submitter's own kernel: the parameter struct each workload
// passes, the layout of every buffer it points to, and how the launch is shaped. A custom
// kernel includes it as <gpuprof/contract.h>; the worker includes it too, so both sides agree
// on the struct byte for byte. Plain C++ with no standard headers (NVRTC has none).
//
// The kernel: one `extern "C" __global__` function taking its workload's struct by value,
//
//   extern "C" __global__ void my_gather(const __grid_constant__ gpuprof_index_params p);
//
// (or `gpuprof_index_params p` without __grid_constant__). gpuprof owns the host side: it
// allocates and fills the buffers, and launches
//
//   blocks  = ceil(items / items_per_block)      (CustomKernel.items_per_block, default 1)
//   threads = block_threads                       (CustomKernel.block_threads, default 256)
//   dynamic shared memory = dynamic_shared_bytes  (default 0)
//
// on one stream, one launch per timed unit of work. What an item is depends on the contract.
// Every buffer starts at a multiple of 256 bytes and every row at a multiple of row_bytes from
// its buffer's start, so a vector access of W bytes is aligned whenever row_bytes % W == 0.
//
// The same numbers are also compile-time macros, so a kernel can specialise as ours do:
//   GPUPROF_BLOCK_THREADS, GPUPROF_ITEMS_PER_BLOCK, GPUPROF_DYNAMIC_SHARED_BYTES,
//   GPUPROF_ROW_BYTES, GPUPROF_ELEMENT_BYTES, and one of GPUPROF_CONTRACT_INDEX,
//   GPUPROF_CONTRACT_STORE, GPUPROF_CONTRACT_DECODE defined as 1; plus per contract the macros
//   named with its struct below.
#ifndef GPUPROF_CONTRACT_H_
#define GPUPROF_CONTRACT_H_

// Raised when a struct changes in a way a kernel would notice.
#define GPUPROF_CONTRACT_VERSION 1

// ---- index: embedding gather --------------------------------------------------------------
//
//   out[t, :] = table[ids[t], :]   for every token t in [0, num_tokens)
//
//   table  [vocab_size x row_bytes]  read only; rows of element_bytes-wide elements
//   ids    [num_tokens] int32        read only; each in [0, vocab_size), repeats allowed
//   out    [num_tokens x row_bytes]  written: every byte of every row, nothing outside it
//
// An item is a token: blocks = ceil(num_tokens / items_per_block), threads = block_threads.
// The bytes are copied as they are (bit for bit); the element type only says how the check
// reports a difference. Extra macros: GPUPROF_VOCAB_SIZE.
struct gpuprof_index_params {
  const void* table;
  const int* ids;
  void* out;
  long long num_tokens;
  long long vocab_size;
  long long row_bytes;  // hidden_dim * element_bytes
  int element_bytes;    // 4 fp32, 2 fp16/bf16, 1 fp8
};

// ---- store: KV-cache scatter ----------------------------------------------------------------
//
//   k_cache[slots[t], :] = k[t, :]  and  v_cache[slots[t], :] = v[t, :]
//                                   for every token t in [0, num_tokens)
//
//   k, v              [num_tokens x row_bytes]   read only; a row is one token's
//                                                num_kv_heads x head_dim elements
//   k_cache, v_cache  [cache_slots x row_bytes]  written: the rows the slots name, and
//                                                nothing else (other slots keep their bytes)
//   slots             [num_tokens] int32         read only; distinct, each in [0, cache_slots)
//
// ONE launch writes both K and V. A page is page_size consecutive slots; paging shows only in
// which slots are chosen. An item is a token: blocks = ceil(num_tokens / items_per_block),
// threads = block_threads. Extra macros: GPUPROF_PAGE_SIZE.
struct gpuprof_store_params {
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  const int* slots;
  long long num_tokens;
  long long cache_slots;
  long long row_bytes;  // num_kv_heads * head_dim * element_bytes
  int element_bytes;
  int page_size;
};

// ---- decode: attention decode over the paged cache ------------------------------------------
//
//   o[b, h, :] = sum_j softmax_j(scale * q[b, h, :] . K_b[j, h / G, :]) * V_b[j, h / G, :]
//                                   for every sequence b, query head h, j in [0, kv_lens[b])
//
// One query token per sequence (the one being generated) attends to all of its sequence's
// cached tokens: nothing is masked. Grouped-query attention: G = num_qo_heads / num_kv_heads
// query heads share one KV head, query head h reading KV head h / G (heads kv * G .. kv * G +
// G - 1 read KV head kv). Elements are bf16 or fp16 (GPUPROF_DTYPE_BF16 says which), the same
// type in every buffer; the check expects scores, softmax and sums in fp32.
//
//   q        [batch_size x num_qo_heads x head_dim]  read only
//   o        [batch_size x num_qo_heads x head_dim]  written: every element, in the input
//                                                    type, and nothing outside it
//   k_cache, v_cache  [num_pages x page_size x num_kv_heads x head_dim]  read only; our paged
//            layout (the one our decode reads): token j of sequence b is slot j % page_size of
//            page page_indices[page_indptr[b] + j / page_size], so element d of KV head kv is
//              k_cache[page * kv_page_stride + (j % page_size) * kv_token_stride
//                      + kv * head_dim + d]                      (strides in elements)
//            and the same in v_cache. A sequence's pages are scattered over the cache, in no
//            order; a page may be partly used (its sequence's last one).
//   page_indptr   [batch_size + 1] int32  read only; sequence b's pages are the entries
//                 page_indptr[b] .. page_indptr[b + 1] - 1 of page_indices,
//                 ceil(kv_lens[b] / page_size) of them; page_indptr[0] = 0
//   page_indices  [page_indptr[batch_size]] int32  read only; page numbers in [0, num_pages),
//                 each used once
//   kv_lens       [batch_size] int32  read only; cached tokens of each sequence, at least 1,
//                 not all equal in general
//
// head_dim is a multiple of 8 (64, 128 or 256), so a 16-byte vector access reads 8 elements
// of a head's row of q, o, k_cache or v_cache, aligned. An item is a (sequence, KV head) pair,
// item = b * num_kv_heads + kv_head: blocks = ceil(batch_size * num_kv_heads / items_per_block)
// (blockIdx.x only), threads = block_threads; block i takes items i * items_per_block ..
// min((i + 1) * items_per_block, batch_size * num_kv_heads) - 1. The block of an item computes
// all G query heads of it, so each K/V row it loads serves G heads.
//
// Extra macros, equal to the fields of the same name: GPUPROF_HEAD_DIM, GPUPROF_GROUP_SIZE
// (G), GPUPROF_PAGE_SIZE (a power of two), GPUPROF_DTYPE_BF16 (1: bf16, 0: fp16);
// GPUPROF_ELEMENT_BYTES is 2 and GPUPROF_ROW_BYTES is head_dim * 2 (one head's row).
//
// The check compares o with our exact fp32 attention on the same inputs: |o - ref| <= 1.5e-2
// + 1.5e-2 |ref| per element and a relative L2 error of at most 1e-2 for bf16 (4e-3, 4e-3 and
// 3e-3 for fp16), the tolerances our own decode kernels are held to.
struct gpuprof_decode_params {
  const void* q;
  const void* k_cache;
  const void* v_cache;
  void* o;
  const int* page_indptr;
  const int* page_indices;
  const int* kv_lens;
  long long num_pages;
  long long kv_page_stride;   // elements from one page to the next: page_size * kv_token_stride
  long long kv_token_stride;  // elements from one slot to the next: num_kv_heads * head_dim
  // The softmax scale in natural units, 1 / sqrt(head_dim): weights exp(scale * q.k) / sum.
  float scale;
  // The same in base 2, scale * log2(e): exp2f(scale_log2 * q.k) == expf(scale * q.k), for
  // kernels that use exp2 (as ours do).
  float scale_log2;
  int batch_size;
  int num_qo_heads;
  int num_kv_heads;
  int head_dim;
  int page_size;
};

#endif  // GPUPROF_CONTRACT_H_
