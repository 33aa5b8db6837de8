#include "tests/metrics/json_struct.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace gpuprof::testing {

absl::StatusOr<google::protobuf::Struct> ParseJsonObject(const std::string& json) {
  google::protobuf::Struct object;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &object);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a JSON object: ", status.ToString(), ": ", json.substr(0, 200)));
  }
  return object;
}

const google::protobuf::Value& Field(const google::protobuf::Struct& object,
                                     const std::string& name) {
  const auto it = object.fields().find(name);
  return it == object.fields().end() ? google::protobuf::Value::default_instance() : it->second;
}

std::string StringField(const google::protobuf::Struct& object, const std::string& name) {
  return Field(object, name).string_value();
}

const google::protobuf::Struct& StructField(const google::protobuf::Struct& object,
                                            const std::string& name) {
  return Field(object, name).struct_value();
}

const google::protobuf::ListValue& ListField(const google::protobuf::Struct& object,
                                             const std::string& name) {
  return Field(object, name).list_value();
}

}  // namespace gpuprof::testing
