#include "client/request_text.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/terminal_text.h"
#include "google/protobuf/descriptor.h"

namespace gpuprof::client {
namespace {

using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::Message;
using ::google::protobuf::Reflection;

absl::Status CheckMessage(const Message& message, const std::string& path);

std::string ElementPath(const Message& message, const FieldDescriptor& field,
                        const std::string& path, int index) {
  // A map entry is named by its key ("labels[team]") when the key is text that can be shown.
  if (field.is_map()) {
    const Message& entry = message.GetReflection()->GetRepeatedMessage(message, &field, index);
    const FieldDescriptor* key = entry.GetDescriptor()->map_key();
    if (key->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      const std::string text = entry.GetReflection()->GetString(entry, key);
      if (!FirstInvalidUtf8Byte(text).has_value()) {
        return absl::StrCat(path, "[", EscapeForTerminal(text), "]");
      }
    }
  }
  return absl::StrCat(path, "[", index, "]");
}

absl::Status CheckField(const Message& message, const FieldDescriptor& field,
                        const std::string& path) {
  const Reflection& reflection = *message.GetReflection();
  if (field.cpp_type() == FieldDescriptor::CPPTYPE_STRING &&
      field.type() != FieldDescriptor::TYPE_BYTES) {
    if (!field.is_repeated()) return CheckUtf8(path, reflection.GetString(message, &field));
    for (int i = 0; i < reflection.FieldSize(message, &field); ++i) {
      const absl::Status status = CheckUtf8(absl::StrCat(path, "[", i, "]"),
                                            reflection.GetRepeatedString(message, &field, i));
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }
  if (field.cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) return absl::OkStatus();
  if (!field.is_repeated()) return CheckMessage(reflection.GetMessage(message, &field), path);
  for (int i = 0; i < reflection.FieldSize(message, &field); ++i) {
    const Message& element = reflection.GetRepeatedMessage(message, &field, i);
    const std::string element_path = ElementPath(message, field, path, i);
    if (field.is_map()) {
      // A map entry's key and value are named by the map's path, not "labels[team].value".
      std::vector<const FieldDescriptor*> parts;
      element.GetReflection()->ListFields(element, &parts);
      for (const FieldDescriptor* part : parts) {
        const absl::Status status = CheckField(
            element, *part, part->name() == "key" ? absl::StrCat(path, " (a key)") : element_path);
        if (!status.ok()) return status;
      }
      continue;
    }
    const absl::Status status = CheckMessage(element, element_path);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status CheckMessage(const Message& message, const std::string& path) {
  std::vector<const FieldDescriptor*> fields;
  message.GetReflection()->ListFields(message, &fields);
  for (const FieldDescriptor* field : fields) {
    const absl::Status status = CheckField(
        message, *field, path.empty() ? field->name() : absl::StrCat(path, ".", field->name()));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckUtf8(absl::string_view what, absl::string_view text) {
  const std::optional<size_t> bad = FirstInvalidUtf8Byte(text);
  if (!bad.has_value()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: byte 0x%02X at byte %d is not UTF-8; text sent to gpuprofd must be UTF-8", what,
      static_cast<unsigned char>(text[*bad]), *bad));
}

absl::Status CheckRequestIsUtf8(const google::protobuf::Message& request) {
  const absl::Status status = CheckMessage(request, "");
  if (status.ok()) return status;
  return absl::InvalidArgumentError(absl::StrCat(status.message(), " (the request was not sent)"));
}

}  // namespace gpuprof::client
