// Arbitrary text as the value of a CLI flag or a sweep axis: the first byte picks one of the
// flag-settable fields of an ExperimentRequest (common fields and every workload spec), the rest is
// the text. The parser must accept it or refuse it with InvalidArgument and a message, never crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/field_text.h"
#include "google/protobuf/descriptor.h"
#include "gpuprof/v1/experiment.pb.h"

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

struct SettableField {
  // Message fields to descend through from ExperimentRequest, then the field to set.
  std::vector<const FieldDescriptor*> path;
};

void Collect(const Descriptor* descriptor, std::vector<const FieldDescriptor*>& path,
             std::set<const Descriptor*>& seen, std::vector<SettableField>& out) {
  if (!seen.insert(descriptor).second) return;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    path.push_back(field);
    if (gpuprof::IsSettableFromText(field)) {
      out.push_back({path});
    } else if (field->type() == FieldDescriptor::TYPE_MESSAGE && !field->is_repeated()) {
      Collect(field->message_type(), path, seen, out);
    }
    path.pop_back();
  }
  seen.erase(descriptor);
}

const std::vector<SettableField>& Fields() {
  static const auto* fields = [] {
    auto* out = new std::vector<SettableField>;
    std::vector<const FieldDescriptor*> path;
    std::set<const Descriptor*> seen;
    Collect(gpuprof::v1::ExperimentRequest::descriptor(), path, seen, *out);
    return out;
  }();
  return *fields;
}

void RequireClearRefusal(const absl::Status& status, const char* what) {
  if (status.ok()) return;
  if (status.code() != absl::StatusCode::kInvalidArgument || status.message().empty()) {
    std::fprintf(stderr, "%s refused without a clear InvalidArgument: %s\n", what,
                 status.ToString().c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::vector<SettableField>& fields = Fields();
  const SettableField& chosen = fields[data[0] % fields.size()];
  const absl::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  gpuprof::v1::ExperimentRequest request;
  google::protobuf::Message* message = &request;
  for (size_t i = 0; i + 1 < chosen.path.size(); ++i) {
    message = message->GetReflection()->MutableMessage(message, chosen.path[i]);
  }
  RequireClearRefusal(gpuprof::SetFieldFromText(message, chosen.path.back(), text),
                      chosen.path.back()->full_name().c_str());
  // Help text for the field never fails either.
  (void)gpuprof::FieldValueSyntax(chosen.path.back());
  (void)gpuprof::FieldTypeName(chosen.path.back());

  for (auto units : {gpuprof::SizeUnits::kCount, gpuprof::SizeUnits::kBytes}) {
    const auto parsed = gpuprof::ParseSizedInteger(text, units);
    RequireClearRefusal(parsed.status(), "ParseSizedInteger");
  }
  RequireClearRefusal(gpuprof::ParseBool(text).status(), "ParseBool");
  return 0;
}
