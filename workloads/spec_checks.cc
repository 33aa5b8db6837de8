#include "workloads/spec_checks.h"

#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/data_types.h"

namespace gpuprof::workloads {
namespace {

// a * b * ... without signed overflow; nullopt when the product does not fit in int64.
std::optional<int64_t> CheckedProduct(std::initializer_list<int64_t> factors) {
  int64_t product = 1;
  for (int64_t factor : factors) {
    if (__builtin_mul_overflow(product, factor, &product)) return std::nullopt;
  }
  return product;
}

}  // namespace

absl::Status CheckRange(absl::string_view field, int64_t value, int64_t low, int64_t high) {
  if (value >= low && value <= high) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: got %d; must be in [%d, %d]", field, value, low, high));
}

absl::Status CheckPowerOfTwo(absl::string_view field, int64_t value) {
  if (value > 0 && (value & (value - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: got %d; must be a power of two", field, value));
  }
  return absl::OkStatus();
}

absl::Status CheckDataType(absl::string_view field, gpuprof::v1::DataType dtype,
                           const std::vector<gpuprof::v1::DataType>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), dtype) != allowed.end()) {
    return absl::OkStatus();
  }
  std::vector<std::string> names;
  for (gpuprof::v1::DataType type : allowed) names.push_back(DataTypeName(type));
  return absl::InvalidArgumentError(absl::StrFormat("%s: got %s; must be one of %s", field,
                                                    DataTypeName(dtype),
                                                    absl::StrJoin(names, ", ")));
}

absl::Status CheckBytesFit(absl::string_view what, std::initializer_list<int64_t> factors,
                           int64_t limit_bytes, absl::string_view limit_name) {
  const auto bytes = CheckedProduct(factors);
  if (!bytes.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the sizes overflow a 64-bit byte count"));
  }
  if (limit_bytes > 0 && *bytes > limit_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: needs %.2f GiB, more than %s (%.2f GiB)", what, *bytes / 1073741824.0, limit_name,
        limit_bytes / 1073741824.0));
  }
  return absl::OkStatus();
}

}  // namespace gpuprof::workloads
