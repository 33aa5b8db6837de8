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
// (gpuprof_decode_params is defined here.)

#endif  // GPUPROF_CONTRACT_H_
