// Proto field values as typed on the command line, driven by descriptors so that new proto
// fields need no client code: integers with size suffixes, enums by short name, booleans,
// durations, "START:END" for small messages, "KEY=VALUE" for maps, comma lists for repeated
// fields. The CLI's flags and the sweep axes the daemon expands share this syntax.
//
// Size suffixes: on byte-sized fields (the name contains "bytes") K/M/G/T are 1024-based and
// may end in B ("64M" = "64MiB" = 67108864); on counts they are 1000-based ("32K" = 32000,
// "1.5M" = 1500000). Ki/Mi/Gi/Ti are always 1024-based ("4Ki" = 4096). "0x" marks hex.
#ifndef GPUPROF_COMMON_FIELD_TEXT_H_
#define GPUPROF_COMMON_FIELD_TEXT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/enum_names.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace gpuprof {

enum class SizeUnits { kCount, kBytes };

// A signed integer with the size suffixes described above. Syntax only: negative values pass.
absl::StatusOr<int64_t> ParseSizedInteger(absl::string_view text, SizeUnits units);

// "true/false", "1/0", "yes/no", "on/off", any case.
absl::StatusOr<bool> ParseBool(absl::string_view text);

// Whether K/M/G on this field are 1024-based: the field holds a number of bytes.
bool IsByteSizedField(const google::protobuf::FieldDescriptor* field);

// Sets `field` of `message` from `text` (appends for repeated and map fields). Errors
// (InvalidArgument) quote the text and say what is allowed, but do not name the flag: the
// caller knows how the user spelled it.
absl::Status SetFieldFromText(google::protobuf::Message* message,
                              const google::protobuf::FieldDescriptor* field,
                              absl::string_view text);

// Whether SetFieldFromText can set this field at all (not for repeated messages, say).
bool IsSettableFromText(const google::protobuf::FieldDescriptor* field);

// How a value for the field is written: "INT", "BYTES", "fp32|fp16|bf16", "START:END",
// "DURATION", "KEY=VALUE", "INT[,INT...]".
std::string FieldValueSyntax(const google::protobuf::FieldDescriptor* field);

// One value of `field` (element `index` of a repeated field; ignored otherwise) in the syntax
// SetFieldFromText reads: integers in full, enums by short name, true/false, strings as they
// are, a Duration as "1m30s", a small message as its fields joined by ':' (a map entry as
// key=value). Doubles and floats are written by `number_text`: the sweeps' short form or the
// CLI's round-trip one.
std::string FieldValueAsText(const google::protobuf::Message& message,
                             const google::protobuf::FieldDescriptor* field, int index,
                             std::string (*number_text)(double));

// The field's proto type for help: "int64", "DataType", "VocabRange", "repeated int32".
std::string FieldTypeName(const google::protobuf::FieldDescriptor* field);

}  // namespace gpuprof

#endif  // GPUPROF_COMMON_FIELD_TEXT_H_
