// Host-side construction of a paged KV layout: per-sequence page tables for given lengths, the
// row -> (page, slot) mapping the kernels use, and the index arrays to upload.
#ifndef GPUPROF_KERNELS_ATTENTION_PAGED_LAYOUT_H_
#define GPUPROF_KERNELS_ATTENTION_PAGED_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention/attention_params.h"

namespace gpuprof::attention {

struct PagedLayout {
  std::vector<int32_t> q_indptr;      // [batch + 1]
  std::vector<int32_t> page_indptr;   // [batch + 1]
  std::vector<int32_t> page_indices;  // [page_indptr[batch]]
  int64_t num_pages = 0;              // pages the cache must hold
};

// Gives each sequence ceil(kv_len / page_size) pages, drawn from a pool of exactly that many
// pages and shuffled with `seed` (seed 0: in order), so that tests exercise scattered pages.
// Also fills `lengths.num_pages`.
absl::StatusOr<PagedLayout> BuildPagedLayout(SequenceLengths& lengths, int page_size,
                                             uint64_t seed);

// Flat row index (page * page_size + slot) of KV row `row` of sequence `sequence`.
int64_t PagedRowIndex(const PagedLayout& layout, int page_size, int sequence, int64_t row);

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_PAGED_LAYOUT_H_
