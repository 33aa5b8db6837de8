#include "client/workload_flag_help.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/field_comments.h"
#include "client/submit_command_line.h"
#include "common/enum_names.h"
#include "common/field_text.h"
#include "workloads/spec_table.h"
#include "workloads/workload_spec.h"

namespace gpuprof::client {
namespace {

using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::Message;
using ::google::protobuf::Reflection;

// Hosts that refuse nothing for their size: what help probes validation with, so that only
// the workload's own rules decide.
workloads::HostLimits GenerousHost() {
  return {.smallest_gpu_memory_bytes = int64_t{1} << 50, .gpu_count = 8, .nccl_version = "99.0"};
}

const workloads::WorkloadSpec* SpecOf(const ExperimentRequestBuilder& builder) {
  v1::ExperimentRequest request;
  request.GetReflection()->MutableMessage(&request, WorkloadField(builder));
  return workloads::FindWorkloadSpec(request.workload_case());
}

// The comment's first sentence: help is one line a flag.
std::string FirstSentence(absl::string_view comment) {
  const size_t end = comment.find(". ");
  std::string sentence(end == absl::string_view::npos ? comment : comment.substr(0, end + 1));
  if (!sentence.empty() && sentence.back() != '.' && sentence.back() != ')') sentence += '.';
  if (!sentence.empty()) sentence[0] = absl::ascii_toupper(sentence[0]);
  return sentence;
}

bool IsZero(const Message& message, const FieldDescriptor* field) {
  return !field->is_repeated() && !message.GetReflection()->HasField(message, field);
}

// "attention.dtype: got ..." is about `field`.
bool NamesField(const absl::Status& status, const ExperimentRequestBuilder& builder,
                const FieldDescriptor* field) {
  return absl::StartsWith(status.message(),
                          absl::StrCat(builder.workload(), ".", field->name(), ":")) ||
         absl::StartsWith(status.message(),
                          absl::StrCat(builder.workload(), ".", field->name(), "["));
}

}  // namespace

const FieldDescriptor* WorkloadField(const ExperimentRequestBuilder& builder) {
  return v1::ExperimentRequest::descriptor()->FindFieldByName(builder.workload());
}

std::vector<FlagSpec> DescribedWorkloadFlags(const ExperimentRequestBuilder& builder) {
  std::vector<FlagSpec> flags = builder.workload_flags();
  const workloads::WorkloadSpec* spec = SpecOf(builder);
  const FieldDescriptor* workload_field = WorkloadField(builder);
  v1::ExperimentRequest defaulted;
  defaulted.GetReflection()->MutableMessage(&defaulted, workload_field);
  if (spec != nullptr && spec->apply_defaults != nullptr) {
    spec->apply_defaults(v1::ListGpusResponse(), defaulted);
  }
  const Message& spec_defaults = defaulted.GetReflection()->GetMessage(defaulted, workload_field);

  for (FlagSpec& flag : flags) {
    const FieldDescriptor* field = builder.FieldForFlag(flag.name);
    if (field == nullptr) continue;
    std::string help = FirstSentence(FieldComment(field->full_name()));
    if (help.empty()) help = FieldTypeName(field);
    // Enums: only what the workload accepts, asked of its validation one value at a time.
    if (field->enum_type() != nullptr && !field->is_repeated() && spec != nullptr &&
        spec->validate != nullptr) {
      std::vector<std::string> accepted;
      for (int i = 0; i < field->enum_type()->value_count(); ++i) {
        const auto* value = field->enum_type()->value(i);
        if (value->number() == 0) continue;
        v1::ExperimentRequest probe;
        Message* probed = probe.GetReflection()->MutableMessage(&probe, workload_field);
        probed->GetReflection()->SetEnumValue(probed, field, value->number());
        if (spec->apply_defaults != nullptr) spec->apply_defaults(v1::ListGpusResponse(), probe);
        const absl::Status status = spec->validate(probe, GenerousHost());
        if (status.ok() || !NamesField(status, builder, field)) {
          accepted.push_back(EnumShortName(value));
        }
      }
      if (!accepted.empty()) flag.value_syntax = absl::StrJoin(accepted, "|");
    }
    if (!field->is_repeated() && !IsZero(spec_defaults, field)) {
      absl::StrAppend(&help, " (default: ", FieldValueText(spec_defaults, field), ")");
    }
    flag.help = std::move(help);
  }
  return flags;
}

std::vector<FlagSpec> DescribedCustomKernelFlags(const ExperimentRequestBuilder& builder) {
  std::vector<FlagSpec> flags = builder.custom_kernel_flags();
  for (FlagSpec& flag : flags) {
    const FieldDescriptor* field = builder.FieldForFlag(flag.name);
    if (field == nullptr || !flag.help.empty()) continue;
    flag.help = FirstSentence(FieldComment(field->full_name()));
  }
  return flags;
}

namespace {

// Common flags whose 0 the daemon replaces by its default (daemon/admission's ApplyDefaults and
// the workloads' specs), with that default and what the flag takes. Flags whose 0 means
// something (--warmup 0, --noise 0, --graph 0, --priority 0) are not here: they are sent.
struct ReplacedZero {
  const char* flag;
  const char* field;
  const char* replaced_by;
  const char* allowed;
};
constexpr ReplacedZero kReplacedZeros[] = {
    {"min-iters", "measurement.min_iterations", "100 on a GPU, 5 passes for radix",
     "at least 1"},
    {"max-iters", "measurement.max_iterations", "1000 on a GPU", "at least 1"},
    {"time-budget", "measurement.time_budget", "2s", "a positive duration"},
    {"timeout", "timeout", "the daemon's --default_timeout", "a positive duration"},
    {"tp", "tp_degree", "1, or a collective's GPU count", "at least 1"},
};

bool IsZeroText(absl::string_view value) {
  const absl::StatusOr<int64_t> number = ParseSizedInteger(value, SizeUnits::kCount);
  if (number.ok()) return *number == 0;
  absl::Duration duration;
  return absl::ParseDuration(value, &duration) && duration == absl::ZeroDuration();
}

}  // namespace

absl::Status CheckNoSilentZeros(const ExperimentRequestBuilder& builder, const ParsedArgs& args,
                                const v1::ExperimentRequest& request) {
  for (const FlagValue& flag : args.flags) {
    for (const ReplacedZero& replaced : kReplacedZeros) {
      if (flag.name != replaced.flag || !IsZeroText(flag.value)) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag.typed_name, " ", flag.value, ": ", replaced.field,
          " of 0 means unset, which the daemon replaces by its default (", replaced.replaced_by,
          "); give ", replaced.allowed, ", or leave the flag out for the default"));
    }
  }
  const workloads::WorkloadSpec* spec = SpecOf(builder);
  if (spec == nullptr || spec->apply_defaults == nullptr) return absl::OkStatus();
  const FieldDescriptor* workload_field = WorkloadField(builder);
  v1::ExperimentRequest defaulted = request;
  spec->apply_defaults(v1::ListGpusResponse(), defaulted);
  const Reflection* reflection = request.GetReflection();
  const Message& given = reflection->GetMessage(request, workload_field);
  const Message& filled = defaulted.GetReflection()->GetMessage(defaulted, workload_field);
  for (const FlagValue& flag : args.flags) {
    const std::vector<const FieldDescriptor*> path = builder.FieldPathForFlag(flag.name);
    if (path.size() != 2 || path[0] != workload_field) continue;
    const FieldDescriptor* field = path[1];
    if (field->is_repeated() || field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE ||
        field->cpp_type() == FieldDescriptor::CPPTYPE_BOOL || !IsZero(given, field) ||
        IsZero(filled, field)) {
      continue;
    }
    // What the workload takes: its validation's words for a 0 that the defaults left alone.
    v1::ExperimentRequest zero = defaulted;
    Message* zeroed = zero.GetReflection()->MutableMessage(&zero, workload_field);
    zeroed->GetReflection()->ClearField(zeroed, field);
    std::string allowed;
    if (spec->validate != nullptr) {
      const absl::Status status = spec->validate(zero, GenerousHost());
      if (!status.ok() && NamesField(status, builder, field)) {
        const size_t must = status.message().find("must ");
        if (must != absl::string_view::npos) allowed = std::string(status.message().substr(must));
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag.typed_name, " ", flag.value, ": ", builder.workload(), ".", field->name(),
        " of 0 means unset, which the daemon replaces by its default (",
        FieldValueText(filled, field), ")",
        allowed.empty() ? std::string("; give a value other than 0")
                        : absl::StrCat("; the value ", allowed),
        ", or leave the flag out for the default"));
  }
  return absl::OkStatus();
}

}  // namespace gpuprof::client
