#include "client/submit_command_line.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/record_row.h"
#include "client/request_builder.h"
#include "common/field_text.h"
#include "google/protobuf/util/message_differencer.h"

namespace gpuprof::client {
namespace {

using ::google::protobuf::Descriptor;
using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::Message;
using ::google::protobuf::Reflection;

// One value as the flag parser reads it back: doubles at round-trip precision, no size
// suffixes, so the exact value.
std::string ExactText(const Message& message, const FieldDescriptor* field, int index) {
  return FieldValueAsText(message, field, index, RoundTripNumber);
}

// Appends "--flag value" for each value `field` of `message` holds.
absl::Status AppendFlag(const Message& message, const FieldDescriptor* field,
                        const std::string& flag, std::vector<std::string>& words) {
  const Reflection* reflection = message.GetReflection();
  if (field->is_map()) {
    for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
      const Message& entry = reflection->GetRepeatedMessage(message, field, i);
      const Descriptor* type = entry.GetDescriptor();
      words.push_back(absl::StrCat("--", flag));
      words.push_back(absl::StrCat(ExactText(entry, type->map_key(), 0), "=",
                                   ExactText(entry, type->map_value(), 0)));
    }
    return absl::OkStatus();
  }
  if (field->is_repeated()) {
    for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
      const std::string text = ExactText(message, field, i);
      // The parser splits a repeated value on ','.
      if (absl::StrContains(text, ',')) {
        return absl::FailedPreconditionError(
            absl::StrCat(field->name(), ": \"", text, "\" holds a comma, which --", flag,
                         " would split"));
      }
      words.push_back(absl::StrCat("--", flag));
      words.push_back(text);
    }
    return absl::OkStatus();
  }
  if (field->cpp_type() == FieldDescriptor::CPPTYPE_BOOL) {
    words.push_back(absl::StrCat("--", flag, "=", ExactText(message, field, 0)));
    return absl::OkStatus();
  }
  words.push_back(absl::StrCat("--", flag));
  words.push_back(ExactText(message, field, 0));
  return absl::OkStatus();
}

bool IsShellSafe(absl::string_view word) {
  if (word.empty()) return false;
  for (const char c : word) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        absl::string_view("_-./:=,@%+").find(c) == absl::string_view::npos) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> SubmitCommandWords(const v1::ExperimentRequest& request) {
  const Reflection* reflection = request.GetReflection();
  const FieldDescriptor* workload = reflection->GetOneofFieldDescriptor(
      request, request.GetDescriptor()->FindOneofByName("workload"));
  if (workload == nullptr) return absl::FailedPreconditionError("the request names no workload");
  absl::StatusOr<ExperimentRequestBuilder> builder =
      ExperimentRequestBuilder::ForWorkload(workload->name());
  if (!builder.ok()) return builder.status();

  std::vector<std::string> words = {"submit", workload->name()};
  // A custom kernel's source is not a flag's value: the command names its file, which
  // `gpuprof get ID --source > FILE` writes.
  v1::ExperimentRequest without_source = request;
  if (request.custom_kernel().source().empty()) {
    without_source.mutable_custom_kernel()->clear_file_name();
  } else {
    words.push_back(absl::StrCat("--", kKernelFileFlag));
    words.push_back(request.custom_kernel().file_name().empty()
                        ? "kernel.cu"
                        : request.custom_kernel().file_name());
    without_source.mutable_custom_kernel()->clear_source();
    without_source.mutable_custom_kernel()->clear_file_name();
  }
  for (const auto& flags :
       {builder->workload_flags(), builder->custom_kernel_flags(), builder->common_flags()}) {
    for (const FlagSpec& flag : flags) {
      const std::vector<const FieldDescriptor*> path = builder->FieldPathForFlag(flag.name);
      const Message* message = &request;
      bool present = true;
      for (size_t i = 0; i + 1 < path.size() && present; ++i) {
        present = message->GetReflection()->HasField(*message, path[i]);
        if (present) message = &message->GetReflection()->GetMessage(*message, path[i]);
      }
      if (!present || path.empty()) continue;
      const FieldDescriptor* field = path.back();
      const bool set = field->is_repeated()
                           ? message->GetReflection()->FieldSize(*message, field) > 0
                           : message->GetReflection()->HasField(*message, field);
      if (!set) continue;
      if (const absl::Status status = AppendFlag(*message, field, flag.name, words);
          !status.ok()) {
        return status;
      }
    }
  }

  // What no flag says would be lost: parse the words back and compare.
  std::vector<FlagSpec> specs = builder->workload_flags();
  specs.insert(specs.end(), builder->custom_kernel_flags().begin(),
               builder->custom_kernel_flags().end());
  specs.insert(specs.end(), builder->common_flags().begin(), builder->common_flags().end());
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(std::vector<std::string>(words.begin() + 2, words.end()), specs);
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<v1::ExperimentRequest> rebuilt = builder->Build(*parsed);
  if (!rebuilt.ok()) return rebuilt.status();
  google::protobuf::util::MessageDifferencer differencer;
  // An empty sub-message says nothing a missing one does not.
  differencer.set_message_field_comparison(
      google::protobuf::util::MessageDifferencer::EQUIVALENT);
  std::string differences;
  differencer.ReportDifferencesToString(&differences);
  if (!differencer.Compare(without_source, *rebuilt)) {
    return absl::FailedPreconditionError(
        absl::StrCat("no command line says all of this request: ", differences));
  }
  return words;
}

std::string FieldValueText(const Message& message, const FieldDescriptor* field) {
  return ExactText(message, field, 0);
}

v1::ExperimentRequest RequestToReproduce(const v1::Experiment& experiment) {
  v1::ExperimentRequest request = experiment.request();
  request.clear_user();
  const v1::ExperimentRequest& ran = experiment.result().provenance().request();
  const FieldDescriptor* field = request.GetReflection()->GetOneofFieldDescriptor(
      request, request.GetDescriptor()->FindOneofByName("workload"));
  if (field != nullptr && ran.GetReflection()->HasField(ran, field)) {
    request.GetReflection()->MutableMessage(&request, field)->CopyFrom(
        ran.GetReflection()->GetMessage(ran, field));
  }
  return request;
}

std::string ShellCommandLine(const std::vector<std::string>& words) {
  std::vector<std::string> quoted = {"gpuprof"};
  for (const std::string& word : words) {
    quoted.push_back(IsShellSafe(word)
                         ? word
                         : absl::StrCat("'", absl::StrReplaceAll(word, {{"'", "'\\''"}}), "'"));
  }
  return absl::StrJoin(quoted, " ");
}

}  // namespace gpuprof::client
