// Inputs and CPU references for the index and store kernels: deterministic random data, token
// ids, slot patterns, the reference gather and scatter, and an exact element comparison.
#ifndef GPUPROF_KERNELS_COPY_COPY_REFERENCE_H_
#define GPUPROF_KERNELS_COPY_COPY_REFERENCE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuprof::kernels {

enum class SlotPattern {
  kSequential,  // pages 0, 1, 2, ...: a fresh request filling contiguous pages
  kRandom,      // distinct random pages in random order
  kSorted,      // distinct random pages, ascending
};

enum class ElementType { kFloat32, kFloat16, kBFloat16, kFloat8E4M3 };

int ElementBytes(ElementType type);

// Fills `bytes` from a SplitMix64 stream of `seed`: reproducible, and never all zeros (zeros
// would hide unwritten outputs). The same bytes as the GPU's FillDeviceCounterBytes.
void FillRandomBytes(std::span<std::byte> bytes, uint64_t seed);

// Bytes [offset, offset + bytes.size()) of that stream (counter_bytes.h), computed directly.
void FillCounterBytes(uint64_t seed, int64_t offset, std::span<std::byte> bytes);

// num_tokens ids uniform in [0, vocab_size).
std::vector<int32_t> GenerateTokenIds(int64_t num_tokens, int64_t vocab_size, uint64_t seed);

// Slots for num_tokens tokens in a cache of cache_slots slots in pages of page_size: token t
// goes to page pages[t / page_size] at offset t % page_size, with distinct pages chosen by the
// pattern. No slot repeats.
absl::StatusOr<std::vector<int32_t>> GenerateSlots(SlotPattern pattern, int64_t num_tokens,
                                                   int64_t cache_slots, int64_t page_size,
                                                   uint64_t seed);

// out[t] = table[ids[t] - vocab_start] for ids in [vocab_start, vocab_end), zeros for others
// when `masked`; unmasked gathers table[ids[t]]. `table` holds the local rows only.
void ReferenceGather(std::span<const std::byte> table, std::span<const int32_t> ids,
                     int64_t row_bytes, bool masked, int64_t vocab_start, int64_t vocab_end,
                     std::span<std::byte> out);

// ReferenceGather over a table whose local bytes are the counter stream of `seed` (a table the
// GPU filled in place): only the gathered rows are computed.
void ReferenceGatherGenerated(uint64_t seed, std::span<const int32_t> ids, int64_t row_bytes,
                              bool masked, int64_t vocab_start, int64_t vocab_end,
                              std::span<std::byte> out);

// cache[slots[t]] = source[t].
void ReferenceScatter(std::span<const std::byte> source, std::span<const int32_t> slots,
                      int64_t row_bytes, std::span<std::byte> cache);

struct ComparisonResult {
  int64_t elements = 0;
  int64_t mismatches = 0;       // elements whose bytes differ
  int64_t first_mismatch = -1;  // element index
  double max_abs_error = 0;     // over mismatching elements with finite values
};

// Exact, element by element (copies must match bit for bit); the error magnitude is only
// for the report.
ComparisonResult CompareElements(std::span<const std::byte> expected,
                                 std::span<const std::byte> actual, ElementType type);

// An element's value as a double (for messages and max_abs_error).
double ElementValue(const std::byte* element, ElementType type);

}  // namespace gpuprof::kernels

#endif  // GPUPROF_KERNELS_COPY_COPY_REFERENCE_H_
