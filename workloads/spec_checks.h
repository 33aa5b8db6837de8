// The checks workload specs are validated with; each error names the field, the value and
// what is allowed, e.g. "index.num_tokens: got -5; must be in [1, 16777216]".
#ifndef GPUPROF_WORKLOADS_SPEC_CHECKS_H_
#define GPUPROF_WORKLOADS_SPEC_CHECKS_H_

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gpuprof/v1/workloads.pb.h"

namespace gpuprof::workloads {

// Most tokens a copy workload (index, store) takes in one request.
inline constexpr int64_t kMaxTokens = int64_t{1} << 24;

absl::Status CheckRange(absl::string_view field, int64_t value, int64_t low, int64_t high);
absl::Status CheckPowerOfTwo(absl::string_view field, int64_t value);
absl::Status CheckDataType(absl::string_view field, gpuprof::v1::DataType dtype,
                           const std::vector<gpuprof::v1::DataType>& allowed);
// INVALID_ARGUMENT when the product of `factors` overflows, or exceeds `limit_bytes` (> 0).
absl::Status CheckBytesFit(absl::string_view what, std::initializer_list<int64_t> factors,
                           int64_t limit_bytes, absl::string_view limit_name);

// Sets `value` to `fallback` when it is zero: the shape of every default.
template <typename T, typename Setter>
void SetIfZero(T value, Setter setter) {
  if (value == T{}) setter();
}

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_SPEC_CHECKS_H_
