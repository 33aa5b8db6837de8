// JSON for tests through protobuf's google.protobuf.Struct (already a dependency), so that
// dashboards and Prometheus API answers can be read without another JSON library.
#ifndef GPUPROF_TESTS_METRICS_JSON_STRUCT_H_
#define GPUPROF_TESTS_METRICS_JSON_STRUCT_H_

#include <string>

#include "absl/status/statusor.h"
#include "google/protobuf/struct.pb.h"

namespace gpuprof::testing {

// Parses a JSON document whose top level is an object.
absl::StatusOr<google::protobuf::Struct> ParseJsonObject(const std::string& json);

// Field accessors that return an empty value (and never throw) when the field is missing or
// of another kind, so that structure checks can report what is wrong instead of crashing.
const google::protobuf::Value& Field(const google::protobuf::Struct& object,
                                     const std::string& name);
std::string StringField(const google::protobuf::Struct& object, const std::string& name);
const google::protobuf::Struct& StructField(const google::protobuf::Struct& object,
                                            const std::string& name);
const google::protobuf::ListValue& ListField(const google::protobuf::Struct& object,
                                             const std::string& name);

}  // namespace gpuprof::testing

#endif  // GPUPROF_TESTS_METRICS_JSON_STRUCT_H_
