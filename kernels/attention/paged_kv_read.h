// A read of exactly the K and V bytes a paged decode reads, through the same page table, with
// nothing done to them: the paged cache's own read rate, measured on the GPU beside the decode
// (a plain streaming read of as many bytes is the rate of contiguous K and V).
#ifndef GPUPROF_KERNELS_ATTENTION_PAGED_KV_READ_H_
#define GPUPROF_KERNELS_ATTENTION_PAGED_KV_READ_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "kernels/attention/attention_params.h"

namespace gpuprof::attention {

// How the read walks each sequence's slots. kPerKvHead: a block reads one KV head's part of
// every slot (head_dim x 2 bytes a slot, slots num_kv_heads x head_dim x 2 bytes apart), as the
// decode kernels read it; the KV heads' blocks of a key range run side by side. kWholeSlots: a
// block reads each slot row whole, every KV head's part at once.
enum class PagedKvReadOrder { kPerKvHead, kWholeSlots };

// Enqueues the read of every sequence's kv_len K and V slots of `problem` on `stream`, in
// blocks enough to fill the GPU several times over. `sink` (16 bytes of device memory) takes a
// store that the compiler cannot prove dead and that real data never makes. head_dim x 2 / 16,
// num_kv_heads and page_size must be powers of two.
absl::Status LaunchPagedKvRead(const AttentionProblem& problem, PagedKvReadOrder order, void* sink,
                               cudaStream_t stream);

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_PAGED_KV_READ_H_
