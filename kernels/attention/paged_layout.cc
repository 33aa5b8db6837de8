#include "kernels/attention/paged_layout.h"

#include <numeric>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpuprof::attention {

absl::StatusOr<PagedLayout> BuildPagedLayout(SequenceLengths& lengths, int page_size,
                                             uint64_t seed) {
  if (page_size <= 0 || (page_size & (page_size - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size (", page_size, ") must be a positive power of two"));
  }
  if (lengths.kv_lens.size() != lengths.q_lens.size()) {
    return absl::InvalidArgumentError(absl::StrCat("kv_lens has ", lengths.kv_lens.size(),
                                                   " entries, q_lens has ", lengths.q_lens.size()));
  }
  PagedLayout layout;
  const int batch = lengths.batch();
  lengths.num_pages.assign(batch, 0);
  layout.q_indptr.assign(batch + 1, 0);
  layout.page_indptr.assign(batch + 1, 0);
  for (int b = 0; b < batch; ++b) {
    lengths.num_pages[b] = (lengths.kv_lens[b] + page_size - 1) / page_size;
    layout.q_indptr[b + 1] = layout.q_indptr[b] + lengths.q_lens[b];
    layout.page_indptr[b + 1] = layout.page_indptr[b] + lengths.num_pages[b];
  }
  layout.num_pages = std::max<int64_t>(layout.page_indptr[batch], 1);
  layout.page_indices.resize(layout.page_indptr[batch]);
  std::iota(layout.page_indices.begin(), layout.page_indices.end(), 0);
  if (seed != 0) {
    std::mt19937_64 random(seed);
    std::shuffle(layout.page_indices.begin(), layout.page_indices.end(), random);
  }
  return layout;
}

int64_t PagedRowIndex(const PagedLayout& layout, int page_size, int sequence, int64_t row) {
  const int64_t page = layout.page_indices[layout.page_indptr[sequence] + row / page_size];
  return page * page_size + row % page_size;
}

}  // namespace gpuprof::attention
