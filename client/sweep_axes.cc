#include "client/sweep_axes.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/field_text.h"

namespace gpuprof::client {
namespace {

using ::google::protobuf::FieldDescriptor;

bool IsIntegerScalar(const FieldDescriptor* field) {
  if (field->is_repeated()) return false;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::StatusOr<std::optional<v1::SweepAxis>> AxisFromFlag(const FieldDescriptor* field,
                                                          const std::string& value) {
  // A repeated field takes a list as one value; a map's entries (labels) can be an axis.
  if (field->is_repeated() && !field->is_map()) return std::nullopt;
  v1::SweepAxis axis;
  const SizeUnits units = IsByteSizedField(field) ? SizeUnits::kBytes : SizeUnits::kCount;
  if (absl::StartsWith(value, "pow2:")) {
    if (!IsIntegerScalar(field)) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", value, "\": powers of two need an integer field"));
    }
    const std::vector<std::string> parts = absl::StrSplit(value.substr(5), ':');
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", value, "\": write powers of two as pow2:MIN:MAX, e.g. pow2:1:64Ki"));
    }
    absl::StatusOr<int64_t> min = ParseSizedInteger(parts[0], units);
    if (!min.ok()) return min.status();
    absl::StatusOr<int64_t> max = ParseSizedInteger(parts[1], units);
    if (!max.ok()) return max.status();
    axis.mutable_powers_of_two()->set_min(*min);
    axis.mutable_powers_of_two()->set_max(*max);
    return axis;
  }
  if (IsIntegerScalar(field) && absl::StrContains(value, ':') && !absl::StrContains(value, ',')) {
    const std::vector<std::string> parts = absl::StrSplit(value, ':');
    if (parts.size() == 2 || parts.size() == 3) {
      std::vector<int64_t> numbers;
      for (const std::string& part : parts) {
        absl::StatusOr<int64_t> number = ParseSizedInteger(part, units);
        if (!number.ok()) return number.status();
        numbers.push_back(*number);
      }
      axis.mutable_range()->set_start(numbers[0]);
      axis.mutable_range()->set_end(numbers[1]);
      axis.mutable_range()->set_step(numbers.size() == 3 ? numbers[2] : 1);
      return axis;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("\"", value, "\": write a range as START:END or START:END:STEP"));
  }
  if (!absl::StrContains(value, ',')) return std::nullopt;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    axis.add_values(std::string(absl::StripAsciiWhitespace(part)));
  }
  return axis;
}

}  // namespace gpuprof::client
