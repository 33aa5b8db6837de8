// The bytes the copy workload's sources hold: a counter-based pattern, different for every
// buffer (its tag), so that a copy from the wrong buffer or a short copy is caught, and
// recomputed when checking, so that no second copy of a buffer is kept on the host.
#ifndef GPUPROF_WORKLOADS_COPY_COPY_PATTERN_H_
#define GPUPROF_WORKLOADS_COPY_COPY_PATTERN_H_

#include <cstddef>
#include <cstdint>

namespace gpuprof::workloads {

// Fills data[0, bytes) with buffer `tag`'s pattern.
void FillCopyPattern(std::byte* data, int64_t bytes, uint64_t tag);

// The offset of the first byte of data[0, bytes) that is not `tag`'s pattern; -1 when all are.
int64_t FirstCopyPatternMismatch(const std::byte* data, int64_t bytes, uint64_t tag);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_COPY_COPY_PATTERN_H_
