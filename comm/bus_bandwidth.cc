#include "comm/bus_bandwidth.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace gpuprof::comm {

double BusBandwidthFactor(CollectiveOp op, int nranks) {
  if (nranks < 1) return 0;
  const double n = nranks;
  switch (op) {
    case CollectiveOp::kAllReduce:
      return 2.0 * (n - 1) / n;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll:
      return (n - 1) / n;
    case CollectiveOp::kBroadcast:
      return 1.0;
  }
  return 0;
}

size_t AlgorithmBytes(const CollectiveLayout& layout, CollectiveDtype dtype) {
  return layout.total_elements * DtypeSizeBytes(dtype);
}

Bandwidth ComputeBandwidth(CollectiveOp op, size_t algorithm_bytes, double seconds, int nranks) {
  Bandwidth bandwidth;
  if (!(seconds > 0)) return bandwidth;
  bandwidth.algbw_gb_per_s = static_cast<double>(algorithm_bytes) / seconds / 1e9;
  bandwidth.busbw_gb_per_s = bandwidth.algbw_gb_per_s * BusBandwidthFactor(op, nranks);
  return bandwidth;
}

namespace {

// Sizes of the geometric sweep, before rounding to elements. The next size is at least one
// byte larger, so a factor that rounds to no growth still ends.
std::vector<size_t> GeometricSizes(const SizeSweep& sweep) {
  std::vector<size_t> sizes;
  double size = static_cast<double>(sweep.min_bytes);
  while (size <= static_cast<double>(sweep.max_bytes) && sizes.size() <= kMaxSweepSizes) {
    const size_t bytes = static_cast<size_t>(size);
    if (sizes.empty() || bytes > sizes.back()) sizes.push_back(bytes);
    size = std::max(size * sweep.step_factor, static_cast<double>(bytes + 1));
  }
  return sizes;
}

}  // namespace

absl::Status ValidateSizeSweep(const SizeSweep& sweep, int nranks) {
  if (nranks < 1) return absl::InvalidArgumentError(absl::StrCat("nranks: ", nranks, " < 1"));
  if (sweep.min_bytes == 0) return absl::InvalidArgumentError("min_bytes: must be > 0");
  if (sweep.max_bytes < sweep.min_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_bytes: ", sweep.max_bytes, " is below min_bytes ", sweep.min_bytes));
  }
  if (!std::isfinite(sweep.step_factor) || !(sweep.step_factor > 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("step_factor: ", sweep.step_factor, " must be a finite number > 1"));
  }
  if (GeometricSizes(sweep).size() > kMaxSweepSizes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step_factor: ", sweep.step_factor, " from min_bytes ", sweep.min_bytes, " to max_bytes ",
        sweep.max_bytes, " gives more than ", kMaxSweepSizes, " sizes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<size_t>> SweepElementCounts(const SizeSweep& sweep, CollectiveOp op,
                                                       CollectiveDtype dtype, int nranks) {
  if (absl::Status status = ValidateSizeSweep(sweep, nranks); !status.ok()) return status;
  if (absl::Status status = CheckDtypeCompiledIn(dtype); !status.ok()) return status;
  const size_t element_bytes = DtypeSizeBytes(dtype);
  const size_t granule = OpSplitsAcrossRanks(op) ? static_cast<size_t>(nranks) : 1;
  std::vector<size_t> counts;
  for (size_t bytes : GeometricSizes(sweep)) {
    size_t elements = bytes / element_bytes / granule * granule;
    if (elements == 0) elements = granule;
    if (counts.empty() || elements > counts.back()) counts.push_back(elements);
  }
  return counts;
}

}  // namespace gpuprof::comm
