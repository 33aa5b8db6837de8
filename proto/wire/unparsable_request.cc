#include "proto/wire/unparsable_request.h"

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/terminal_text.h"
#include "google/protobuf/unknown_field_set.h"

namespace gpuprof::wire {
namespace {

using ::google::protobuf::Descriptor;
using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::UnknownField;
using ::google::protobuf::UnknownFieldSet;

// The largest field number protobuf allows; no gpuprof message comes near it.
constexpr int kReasonFieldNumber = (1 << 29) - 1;
// Messages nest a few levels; a hostile request may nest deeper than any real one.
constexpr int kMaxDepth = 32;

std::string NotUtf8(const std::string& path, absl::string_view text, size_t offset) {
  return absl::StrFormat(
      "%s: byte 0x%02X at byte %d is not UTF-8; text sent to gpuprofd must be UTF-8 (proto3 "
      "strings), the request was not parsed",
      path, static_cast<unsigned char>(text[offset]), offset);
}

std::string FieldPath(const std::string& parent, const FieldDescriptor& field) {
  return parent.empty() ? field.name() : absl::StrCat(parent, ".", field.name());
}

std::optional<std::string> FindTextThatIsNotUtf8(const Descriptor& type,
                                                 const UnknownFieldSet& fields,
                                                 const std::string& path, int depth);

// A map entry is named like the CLI names it: "labels[team]" by its key when the key is text.
std::optional<std::string> CheckMapEntry(const FieldDescriptor& map, absl::string_view bytes,
                                         const std::string& path, int index, int depth) {
  UnknownFieldSet entry;
  if (!entry.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return std::nullopt;
  const Descriptor& entry_type = *map.message_type();
  std::string element = absl::StrCat(path, "[", index, "]");
  for (int i = 0; i < entry.field_count(); ++i) {
    const UnknownField& part = entry.field(i);
    if (part.number() != 1 || part.type() != UnknownField::TYPE_LENGTH_DELIMITED) continue;
    if (entry_type.map_key()->type() != FieldDescriptor::TYPE_STRING) continue;
    const std::string& key = part.length_delimited();
    if (std::optional<size_t> bad = FirstInvalidUtf8Byte(key); bad.has_value()) {
      return NotUtf8(absl::StrCat(path, " (a key)"), key, *bad);
    }
    element = absl::StrCat(path, "[", EscapeForTerminal(key), "]");
  }
  const FieldDescriptor& value = *entry_type.map_value();
  for (int i = 0; i < entry.field_count(); ++i) {
    const UnknownField& part = entry.field(i);
    if (part.number() != 2 || part.type() != UnknownField::TYPE_LENGTH_DELIMITED) continue;
    const std::string& bytes_of_value = part.length_delimited();
    if (value.type() == FieldDescriptor::TYPE_STRING) {
      if (std::optional<size_t> bad = FirstInvalidUtf8Byte(bytes_of_value); bad.has_value()) {
        return NotUtf8(element, bytes_of_value, *bad);
      }
    } else if (value.type() == FieldDescriptor::TYPE_MESSAGE) {
      UnknownFieldSet nested;
      if (!nested.ParseFromArray(bytes_of_value.data(), static_cast<int>(bytes_of_value.size()))) {
        continue;
      }
      if (auto found = FindTextThatIsNotUtf8(*value.message_type(), nested, element, depth + 1)) {
        return found;
      }
    }
  }
  return std::nullopt;
}

// The wire format holds every field by number; the descriptor says which ones are strings (that
// protobuf's parser checks for UTF-8) and which are messages to look into.
std::optional<std::string> FindTextThatIsNotUtf8(const Descriptor& type,
                                                 const UnknownFieldSet& fields,
                                                 const std::string& path, int depth) {
  if (depth > kMaxDepth) return std::nullopt;
  absl::flat_hash_map<int, int> seen;  // repeated fields: the element's index
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& wire = fields.field(i);
    if (wire.type() != UnknownField::TYPE_LENGTH_DELIMITED) continue;
    const FieldDescriptor* field = type.FindFieldByNumber(wire.number());
    if (field == nullptr) continue;
    const int index = seen[wire.number()]++;
    const std::string& bytes = wire.length_delimited();
    std::string field_path = FieldPath(path, *field);
    if (field->is_map()) {
      if (auto found = CheckMapEntry(*field, bytes, field_path, index, depth)) return found;
      continue;
    }
    if (field->is_repeated()) field_path = absl::StrCat(field_path, "[", index, "]");
    if (field->type() == FieldDescriptor::TYPE_STRING) {
      if (std::optional<size_t> bad = FirstInvalidUtf8Byte(bytes); bad.has_value()) {
        return NotUtf8(field_path, bytes, *bad);
      }
    } else if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
      UnknownFieldSet nested;
      if (!nested.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) continue;
      if (auto found = FindTextThatIsNotUtf8(*field->message_type(), nested, field_path,
                                             depth + 1)) {
        return found;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::string WhyRequestDoesNotParse(const Descriptor& type, absl::string_view bytes) {
  UnknownFieldSet fields;
  if (fields.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    if (std::optional<std::string> found = FindTextThatIsNotUtf8(type, fields, "", 0)) {
      return *std::move(found);
    }
  }
  return absl::StrCat("the request is not a valid ", type.full_name(),
                      " message (its protobuf wire format is broken)");
}

void MarkUnparsable(google::protobuf::Message& message, absl::string_view why) {
  message.Clear();
  message.GetReflection()->MutableUnknownFields(&message)->AddLengthDelimited(
      kReasonFieldNumber, std::string(why.substr(0, kMaxReasonBytes)));
}

std::optional<std::string> UnparsableReason(const google::protobuf::Message& message) {
  const UnknownFieldSet& unknown = message.GetReflection()->GetUnknownFields(message);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const UnknownField& field = unknown.field(i);
    if (field.number() != kReasonFieldNumber ||
        field.type() != UnknownField::TYPE_LENGTH_DELIMITED) {
      continue;
    }
    // A client may send this field number itself: what it gets back is bounded and escaped.
    return EscapeForTerminal(
        absl::string_view(field.length_delimited()).substr(0, kMaxReasonBytes));
  }
  return std::nullopt;
}

}  // namespace gpuprof::wire
