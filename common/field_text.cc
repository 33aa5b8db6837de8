#include "common/field_text.h"

#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/duration.pb.h"

namespace gpuprof {
namespace {

using ::google::protobuf::Descriptor;
using ::google::protobuf::EnumDescriptor;
using ::google::protobuf::EnumValueDescriptor;
using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::Message;
using ::google::protobuf::Reflection;

constexpr absl::string_view kDurationType = "google.protobuf.Duration";

absl::Status NotAnInteger(absl::string_view text, SizeUnits units) {
  if (units == SizeUnits::kBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\" is not a byte count (e.g. 4096, 64K, 16MiB, 2G; K/M/G are 1024-based)"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", text,
      "\" is not an integer (e.g. 4096, 32K, 1.5M, 4Ki; K/M/G are 1000-based, Ki/Mi/Gi "
      "1024-based)"));
}

struct Magnitude {
  bool negative = false;
  uint64_t value = 0;
};

// The multiplier a size suffix stands for, or 0 when `suffix` is not one.
uint64_t SuffixMultiplier(absl::string_view suffix, SizeUnits units) {
  if (suffix.empty()) return 1;
  if (units == SizeUnits::kBytes && (suffix == "B" || suffix == "b")) return 1;
  constexpr absl::string_view kPowers = "kmgt";
  const size_t power = kPowers.find(absl::ascii_tolower(suffix[0]));
  if (power == absl::string_view::npos) return 0;
  suffix.remove_prefix(1);
  bool binary = units == SizeUnits::kBytes;
  if (!suffix.empty() && (suffix[0] == 'i' || suffix[0] == 'I')) {
    binary = true;
    suffix.remove_prefix(1);
  }
  if (!suffix.empty() && units == SizeUnits::kBytes && (suffix[0] == 'B' || suffix[0] == 'b')) {
    suffix.remove_prefix(1);
  }
  if (!suffix.empty()) return 0;
  uint64_t multiplier = 1;
  for (size_t i = 0; i <= power; ++i) multiplier *= binary ? 1024 : 1000;
  return multiplier;
}

absl::StatusOr<Magnitude> ParseMagnitude(absl::string_view text, SizeUnits units) {
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  Magnitude magnitude;
  if (!rest.empty() && (rest[0] == '-' || rest[0] == '+')) {
    magnitude.negative = rest[0] == '-';
    rest.remove_prefix(1);
  }
  if (absl::StartsWithIgnoreCase(rest, "0x")) {
    if (!absl::SimpleHexAtoi(rest.substr(2), &magnitude.value)) return NotAnInteger(text, units);
    return magnitude;
  }
  size_t number_end = 0;
  while (number_end < rest.size() &&
         (absl::ascii_isdigit(rest[number_end]) || rest[number_end] == '.')) {
    ++number_end;
  }
  const absl::string_view number = rest.substr(0, number_end);
  const uint64_t multiplier = SuffixMultiplier(rest.substr(number_end), units);
  if (number.empty() || multiplier == 0) return NotAnInteger(text, units);
  if (absl::StrContains(number, '.')) {
    // "1.5M": a fraction only makes sense with a suffix, and must come out whole.
    double mantissa = 0;
    if (multiplier == 1 || !absl::SimpleAtod(number, &mantissa)) return NotAnInteger(text, units);
    const double value = mantissa * static_cast<double>(multiplier);
    if (value != std::floor(value) || value >= 0x1p64) {
      return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not a whole number"));
    }
    magnitude.value = static_cast<uint64_t>(value);
    return magnitude;
  }
  uint64_t value = 0;
  if (!absl::SimpleAtoi(number, &value)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is too large"));
  }
  if (value > std::numeric_limits<uint64_t>::max() / multiplier) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is too large"));
  }
  magnitude.value = value * multiplier;
  return magnitude;
}

absl::StatusOr<int64_t> CheckedSigned(absl::string_view text, const Magnitude& magnitude,
                                      int64_t min, int64_t max) {
  const uint64_t limit =
      magnitude.negative ? static_cast<uint64_t>(-(min + 1)) + 1 : static_cast<uint64_t>(max);
  if (magnitude.value > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is out of range [", min, ", ", max, "]"));
  }
  return magnitude.negative ? static_cast<int64_t>(0 - magnitude.value)
                            : static_cast<int64_t>(magnitude.value);
}

absl::StatusOr<uint64_t> CheckedUnsigned(absl::string_view text, const Magnitude& magnitude,
                                         uint64_t max) {
  if (magnitude.negative && magnitude.value != 0) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" must not be negative"));
  }
  if (magnitude.value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is out of range [0, ", max, "]"));
  }
  return magnitude.value;
}

absl::StatusOr<double> ParseFiniteDouble(absl::string_view text) {
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not a number"));
  }
  return value;
}

bool IsScalar(const FieldDescriptor* field) {
  return field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE;
}

// A small message typed as its fields' values joined by ':' ("0:32000" for VocabRange).
bool IsColonMessage(const Descriptor* type) {
  if (type->field_count() == 0 || type->full_name() == kDurationType) return false;
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* field = type->field(i);
    if (field->is_repeated() || !IsScalar(field)) return false;
  }
  return true;
}

// Sets (or, for repeated fields, appends) one scalar value.
absl::Status SetScalar(Message* message, const FieldDescriptor* field, absl::string_view text) {
  const Reflection* reflection = message->GetReflection();
  const bool add = field->is_repeated();
  const SizeUnits units = IsByteSizedField(field) ? SizeUnits::kBytes : SizeUnits::kCount;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      ASSIGN_OR_RETURN(const Magnitude magnitude, ParseMagnitude(text, units));
      ASSIGN_OR_RETURN(const int64_t value,
                       CheckedSigned(text, magnitude, std::numeric_limits<int32_t>::min(),
                                     std::numeric_limits<int32_t>::max()));
      add ? reflection->AddInt32(message, field, static_cast<int32_t>(value))
          : reflection->SetInt32(message, field, static_cast<int32_t>(value));
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      ASSIGN_OR_RETURN(const Magnitude magnitude, ParseMagnitude(text, units));
      ASSIGN_OR_RETURN(const int64_t value,
                       CheckedSigned(text, magnitude, std::numeric_limits<int64_t>::min(),
                                     std::numeric_limits<int64_t>::max()));
      add ? reflection->AddInt64(message, field, value)
          : reflection->SetInt64(message, field, value);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      ASSIGN_OR_RETURN(const Magnitude magnitude, ParseMagnitude(text, units));
      ASSIGN_OR_RETURN(const uint64_t value,
                       CheckedUnsigned(text, magnitude, std::numeric_limits<uint32_t>::max()));
      add ? reflection->AddUInt32(message, field, static_cast<uint32_t>(value))
          : reflection->SetUInt32(message, field, static_cast<uint32_t>(value));
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      ASSIGN_OR_RETURN(const Magnitude magnitude, ParseMagnitude(text, units));
      ASSIGN_OR_RETURN(const uint64_t value,
                       CheckedUnsigned(text, magnitude, std::numeric_limits<uint64_t>::max()));
      add ? reflection->AddUInt64(message, field, value)
          : reflection->SetUInt64(message, field, value);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      ASSIGN_OR_RETURN(const double value, ParseFiniteDouble(text));
      add ? reflection->AddDouble(message, field, value)
          : reflection->SetDouble(message, field, value);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      ASSIGN_OR_RETURN(const double value, ParseFiniteDouble(text));
      add ? reflection->AddFloat(message, field, static_cast<float>(value))
          : reflection->SetFloat(message, field, static_cast<float>(value));
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      ASSIGN_OR_RETURN(const bool value, ParseBool(text));
      add ? reflection->AddBool(message, field, value) : reflection->SetBool(message, field, value);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      ASSIGN_OR_RETURN(const EnumValueDescriptor* value, ParseEnumValue(field->enum_type(), text));
      add ? reflection->AddEnum(message, field, value) : reflection->SetEnum(message, field, value);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_STRING:
      add ? reflection->AddString(message, field, std::string(text))
          : reflection->SetString(message, field, std::string(text));
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return absl::InternalError(absl::StrCat("field ", field->full_name(), " is not a scalar"));
}

absl::Status SetDuration(Message* duration, absl::string_view text) {
  absl::Duration value;
  if (!absl::ParseDuration(text, &value) || value == absl::InfiniteDuration() ||
      value == -absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a duration (e.g. 500ms, 90s, 10m, 1h30m)"));
  }
  // Truncating division keeps seconds and nanos of the same sign, as Duration requires.
  absl::Duration remainder;
  const int64_t seconds = absl::IDivDuration(value, absl::Seconds(1), &remainder);
  const Descriptor* type = duration->GetDescriptor();
  const Reflection* reflection = duration->GetReflection();
  reflection->SetInt64(duration, type->FindFieldByName("seconds"), seconds);
  reflection->SetInt32(duration, type->FindFieldByName("nanos"),
                       static_cast<int32_t>(absl::ToInt64Nanoseconds(remainder)));
  return absl::OkStatus();
}

// "START:END" for VocabRange: the message's field names, upper case, joined by ':'.
std::string ColonSyntax(const Descriptor* type) {
  std::vector<std::string> names;
  for (int i = 0; i < type->field_count(); ++i) {
    names.push_back(absl::AsciiStrToUpper(type->field(i)->name()));
  }
  return absl::StrJoin(names, ":");
}

absl::Status SetColonMessage(Message* message, absl::string_view text) {
  const Descriptor* type = message->GetDescriptor();
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  if (static_cast<int>(parts.size()) != type->field_count()) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not ", ColonSyntax(type)));
  }
  for (int i = 0; i < type->field_count(); ++i) {
    absl::Status status = SetScalar(message, type->field(i), parts[i]);
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(absl::AsciiStrToUpper(type->field(i)->name()), ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status SetMapEntry(Message* message, const FieldDescriptor* field, absl::string_view text) {
  const size_t equals = text.find('=');
  if (equals == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not KEY=VALUE"));
  }
  Message* entry = message->GetReflection()->AddMessage(message, field);
  const Descriptor* entry_type = field->message_type();
  RETURN_IF_ERROR(SetScalar(entry, entry_type->map_key(), text.substr(0, equals)));
  return SetScalar(entry, entry_type->map_value(), text.substr(equals + 1));
}

std::string ScalarSyntax(const FieldDescriptor* field) {
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
      return IsByteSizedField(field) ? "BYTES" : "INT";
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT:
      return "NUM";
    case FieldDescriptor::CPPTYPE_BOOL:
      return "BOOL";
    case FieldDescriptor::CPPTYPE_ENUM:
      return absl::StrJoin(EnumChoices(field->enum_type()), "|");
    case FieldDescriptor::CPPTYPE_STRING:
      return "TEXT";
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return "";
}

}  // namespace

absl::StatusOr<int64_t> ParseSizedInteger(absl::string_view text, SizeUnits units) {
  ASSIGN_OR_RETURN(const Magnitude magnitude, ParseMagnitude(text, units));
  return CheckedSigned(text, magnitude, std::numeric_limits<int64_t>::min(),
                       std::numeric_limits<int64_t>::max());
}

absl::StatusOr<bool> ParseBool(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "true" || lower == "1" || lower == "yes" || lower == "on") return true;
  if (lower == "false" || lower == "0" || lower == "no" || lower == "off") return false;
  return absl::InvalidArgumentError(
      absl::StrCat("\"", text, "\" is not a boolean (true or false)"));
}

bool IsByteSizedField(const FieldDescriptor* field) {
  return absl::StrContains(field->name(), "bytes");
}

bool IsSettableFromText(const FieldDescriptor* field) {
  if (field->is_map()) {
    return IsScalar(field->message_type()->map_key()) &&
           IsScalar(field->message_type()->map_value());
  }
  if (IsScalar(field)) return true;
  if (field->is_repeated()) return false;
  return field->message_type()->full_name() == kDurationType ||
         IsColonMessage(field->message_type());
}

absl::Status SetFieldFromText(Message* message, const FieldDescriptor* field,
                              absl::string_view text) {
  if (field->is_map()) return SetMapEntry(message, field, text);
  if (IsScalar(field)) {
    if (!field->is_repeated()) return SetScalar(message, field, text);
    for (absl::string_view part : absl::StrSplit(text, ',')) {
      RETURN_IF_ERROR(SetScalar(message, field, absl::StripAsciiWhitespace(part)));
    }
    return absl::OkStatus();
  }
  if (!IsSettableFromText(field)) {
    return absl::UnimplementedError(
        absl::StrCat("field ", field->full_name(), " cannot be set from the command line"));
  }
  Message* child = message->GetReflection()->MutableMessage(message, field);
  if (field->message_type()->full_name() == kDurationType) return SetDuration(child, text);
  return SetColonMessage(child, text);
}

std::string FieldValueSyntax(const FieldDescriptor* field) {
  if (field->is_map()) return "KEY=VALUE";
  if (IsScalar(field)) {
    const std::string syntax = ScalarSyntax(field);
    return field->is_repeated() ? absl::StrCat(syntax, "[,", syntax, "...]") : syntax;
  }
  const Descriptor* type = field->message_type();
  if (type->full_name() == kDurationType) return "DURATION";
  return IsColonMessage(type) ? ColonSyntax(type) : "";
}

std::string FieldTypeName(const FieldDescriptor* field) {
  if (field->is_map()) {
    return absl::StrCat("map<", FieldTypeName(field->message_type()->map_key()), ", ",
                        FieldTypeName(field->message_type()->map_value()), ">");
  }
  std::string name;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_ENUM:
      name = field->enum_type()->name();
      break;
    case FieldDescriptor::CPPTYPE_MESSAGE:
      name = field->message_type()->name();
      break;
    default:
      name = field->type_name();
  }
  return field->is_repeated() ? absl::StrCat("repeated ", name) : name;
}

std::string FieldValueAsText(const Message& message, const FieldDescriptor* field, int index,
                             std::string (*number_text)(double)) {
  const Reflection* reflection = message.GetReflection();
  const bool repeated = field->is_repeated();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(repeated ? reflection->GetRepeatedInt32(message, field, index)
                                   : reflection->GetInt32(message, field));
    case FieldDescriptor::CPPTYPE_INT64:
      return absl::StrCat(repeated ? reflection->GetRepeatedInt64(message, field, index)
                                   : reflection->GetInt64(message, field));
    case FieldDescriptor::CPPTYPE_UINT32:
      return absl::StrCat(repeated ? reflection->GetRepeatedUInt32(message, field, index)
                                   : reflection->GetUInt32(message, field));
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrCat(repeated ? reflection->GetRepeatedUInt64(message, field, index)
                                   : reflection->GetUInt64(message, field));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return number_text(repeated ? reflection->GetRepeatedDouble(message, field, index)
                                  : reflection->GetDouble(message, field));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return number_text(repeated ? reflection->GetRepeatedFloat(message, field, index)
                                  : reflection->GetFloat(message, field));
    case FieldDescriptor::CPPTYPE_BOOL:
      return (repeated ? reflection->GetRepeatedBool(message, field, index)
                       : reflection->GetBool(message, field))
                 ? "true"
                 : "false";
    case FieldDescriptor::CPPTYPE_ENUM:
      return EnumShortName(field->enum_type(),
                           repeated ? reflection->GetRepeatedEnumValue(message, field, index)
                                    : reflection->GetEnumValue(message, field));
    case FieldDescriptor::CPPTYPE_STRING:
      return repeated ? reflection->GetRepeatedString(message, field, index)
                      : reflection->GetString(message, field);
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      const Message& child = repeated ? reflection->GetRepeatedMessage(message, field, index)
                                      : reflection->GetMessage(message, field);
      if (child.GetDescriptor()->full_name() == "google.protobuf.Duration") {
        const auto& duration = static_cast<const google::protobuf::Duration&>(child);
        return absl::FormatDuration(absl::Seconds(duration.seconds()) +
                                    absl::Nanoseconds(duration.nanos()));
      }
      // Small messages are typed as their fields joined by ':' (a map entry as key=value).
      std::vector<std::string> parts;
      const Descriptor* type = child.GetDescriptor();
      for (int i = 0; i < type->field_count(); ++i) {
        parts.push_back(FieldValueAsText(child, type->field(i), -1, number_text));
      }
      return absl::StrJoin(parts, type->options().map_entry() ? "=" : ":");
    }
  }
  return "";
}

}  // namespace gpuprof
