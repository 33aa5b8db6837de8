#include "common/enum_names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace gpuprof {
namespace {

using ::google::protobuf::EnumDescriptor;
using ::google::protobuf::EnumValueDescriptor;

std::string CanonicalEnumSpelling(absl::string_view text) {
  return absl::AsciiStrToLower(absl::StrReplaceAll(text, {{"_", "-"}}));
}

}  // namespace

absl::string_view EnumCommonPrefix(const EnumDescriptor* type) {
  absl::string_view prefix = type->value(0)->name();
  for (int i = 1; i < type->value_count(); ++i) {
    const absl::string_view name = type->value(i)->name();
    size_t length = 0;
    while (length < prefix.size() && length < name.size() && prefix[length] == name[length]) {
      ++length;
    }
    prefix = prefix.substr(0, length);
  }
  // A one-value enum shares its whole name; never strip a name to nothing.
  if (type->value_count() == 1) prefix = {};
  const size_t last_underscore = prefix.rfind('_');
  return last_underscore == absl::string_view::npos ? absl::string_view()
                                                    : prefix.substr(0, last_underscore + 1);
}

std::string EnumShortName(const EnumValueDescriptor* value) {
  absl::string_view name = value->name();
  name.remove_prefix(EnumCommonPrefix(value->type()).size());
  return CanonicalEnumSpelling(name);
}

std::string EnumShortName(const EnumDescriptor* type, int number) {
  const EnumValueDescriptor* value = type->FindValueByNumber(number);
  return value == nullptr ? absl::StrCat(number) : EnumShortName(value);
}

std::vector<std::string> EnumChoices(const EnumDescriptor* type) {
  std::vector<std::string> choices;
  for (int i = 0; i < type->value_count(); ++i) {
    if (type->value(i)->number() != 0) choices.push_back(EnumShortName(type->value(i)));
  }
  return choices;
}

absl::StatusOr<const EnumValueDescriptor*> ParseEnumValue(const EnumDescriptor* type,
                                                          absl::string_view text) {
  const std::string typed = CanonicalEnumSpelling(absl::StripAsciiWhitespace(text));
  for (int i = 0; i < type->value_count(); ++i) {
    const EnumValueDescriptor* value = type->value(i);
    if (value->number() == 0) continue;
    if (typed == EnumShortName(value) || typed == CanonicalEnumSpelling(value->name())) {
      return value;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"", text, "\" is not one of ", absl::StrJoin(EnumChoices(type), ", ")));
}

}  // namespace gpuprof
