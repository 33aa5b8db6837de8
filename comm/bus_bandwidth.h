// Bandwidth figures as nccl-tests reports them (doc/PERFORMANCE.md in NVIDIA/nccl-tests), and
// the message-size sweep of its -b/-e/-f options. CPU-only.
//
// algbw = S / t, where S is nccl-tests' "size" column: the total array of the operation,
//   which is CollectiveLayout::total_elements * element size:
//   - all_reduce, broadcast: the per-rank send (= receive) buffer;
//   - all_gather: the whole gathered output, sendcount * n (per-rank input times ranks);
//   - reduce_scatter: the whole input, recvcount * n (per-rank output times ranks);
//   - all_to_all: the per-rank send buffer, n chunks.
// busbw = algbw * factor, the factor making the figure comparable with the link's peak whatever
// the rank count: all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n;
// broadcast 1.
#ifndef GPUPROF_COMM_BUS_BANDWIDTH_H_
#define GPUPROF_COMM_BUS_BANDWIDTH_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/collective_types.h"

namespace gpuprof::comm {

// The factor turning algbw into busbw for `nranks` ranks (1 rank: 0 for the ops that move
// nothing between ranks, as nccl-tests prints).
double BusBandwidthFactor(CollectiveOp op, int nranks);

// S in bytes: the byte count algbw divides (see the rule above).
size_t AlgorithmBytes(const CollectiveLayout& layout, CollectiveDtype dtype);

struct Bandwidth {
  double algbw_gb_per_s = 0;  // 1e9 bytes per second
  double busbw_gb_per_s = 0;
};

// Bandwidth of one operation of `algorithm_bytes` taking `seconds` on `nranks` ranks;
// zero for a non-positive time.
Bandwidth ComputeBandwidth(CollectiveOp op, size_t algorithm_bytes, double seconds, int nranks);

// nccl-tests' -b (min_bytes), -e (max_bytes), -f (step_factor): sizes min, min*f, min*f^2, ...
// up to and including max.
struct SizeSweep {
  size_t min_bytes = 8;
  size_t max_bytes = size_t{1} << 30;
  double step_factor = 2.0;
};

// The most sizes a sweep may produce; a factor close to 1 over a wide range is a mistake.
inline constexpr size_t kMaxSweepSizes = 4096;

// INVALID_ARGUMENT naming the field: min_bytes of 0, max_bytes below min_bytes, step_factor not
// above 1 (or not finite), more than kMaxSweepSizes sizes, nranks < 1.
absl::Status ValidateSizeSweep(const SizeSweep& sweep, int nranks);

// Element counts (CollectiveRequest::total_elements) of the sweep for one op and dtype: each
// size rounded down to whole elements and, where the op splits its buffer across ranks, to a
// multiple of nranks; a size that rounds to nothing becomes the smallest valid count. Duplicates
// that rounding creates are dropped, so the list is strictly increasing.
absl::StatusOr<std::vector<size_t>> SweepElementCounts(const SizeSweep& sweep, CollectiveOp op,
                                                       CollectiveDtype dtype, int nranks);

}  // namespace gpuprof::comm

#endif  // GPUPROF_COMM_BUS_BANDWIDTH_H_
