// Short, user-facing names of protobuf enum values, computed from the enum's descriptor rather
// than by cutting a fixed number of characters: DATA_TYPE_FP8_E4M3 -> "fp8-e4m3",
// SLOT_PATTERN_RANDOM -> "random", TIMED_OUT -> "timed-out".
#ifndef GPUPROF_COMMON_ENUM_NAMES_H_
#define GPUPROF_COMMON_ENUM_NAMES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/generated_enum_reflection.h"

namespace gpuprof {

// The prefix every value of the enum shares, cut after an '_' ("DATA_TYPE_"); empty for a
// one-value enum, so that no name is stripped to nothing.
absl::string_view EnumCommonPrefix(const google::protobuf::EnumDescriptor* type);

// An enum value's name without the common prefix, in lower case with '-' for '_'.
std::string EnumShortName(const google::protobuf::EnumValueDescriptor* value);

// EnumShortName of the value numbered `number`, or the number itself if it has no name.
std::string EnumShortName(const google::protobuf::EnumDescriptor* type, int number);

// The typed form: EnumShortName(v1::DATA_TYPE_BF16) == "bf16".
template <typename Enum>
std::string EnumShortName(Enum value) {
  return EnumShortName(google::protobuf::GetEnumDescriptor<Enum>(), static_cast<int>(value));
}

// The short names a user may type, in declaration order, without the zero (UNSPECIFIED) value.
std::vector<std::string> EnumChoices(const google::protobuf::EnumDescriptor* type);

// Accepts a short name or the full name, any case, '-' or '_'. The zero value is not a choice
// (leaving the flag out means it). Error: "\"bf61\" is not one of fp32, fp16, ...".
absl::StatusOr<const google::protobuf::EnumValueDescriptor*> ParseEnumValue(
    const google::protobuf::EnumDescriptor* type, absl::string_view text);

}  // namespace gpuprof

#endif  // GPUPROF_COMMON_ENUM_NAMES_H_
