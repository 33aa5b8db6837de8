#include "client/request_builder.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/request_text.h"
#include "common/field_text.h"

namespace gpuprof::client {
namespace {

using ::google::protobuf::Descriptor;
using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::Message;
using ::google::protobuf::OneofDescriptor;

constexpr absl::string_view kWorkloadOneof = "workload";

// Short names for the fields typed most often. An alias applies to a workload only when its
// spec has the target field and no field of the alias's own name.
struct FieldAlias {
  absl::string_view alias;
  absl::string_view field;
};
constexpr FieldAlias kFieldAliases[] = {
    {"tokens", "num_tokens"},     {"hidden", "hidden_dim"},
    {"vocab", "vocab_size"},      {"heads", "num_qo_heads"},
    {"kv-heads", "num_kv_heads"}, {"batch", "batch_size"},
    {"bytes", "bytes_per_rank"},  {"pattern", "slot_pattern"},
    {"requests", "num_requests"}, {"splits", "num_splits"},
    {"users", "num_users"},       {"system-prompts", "num_system_prompts"},
    {"slots", "cache_slots"},     {"budget", "cache_token_budget"},
};

// Flags every workload shares, each bound to a field path in ExperimentRequest.
struct CommonFlag {
  absl::string_view name;
  absl::string_view path;          // dotted field names from ExperimentRequest
  absl::string_view value_syntax;  // empty: from the field's type
  absl::string_view help;
};
constexpr CommonFlag kCommonFlags[] = {
    {"gpus", "gpus.gpu_ids", "ID[,ID...]", "run on exactly these GPUs"},
    {"gpu-count", "gpus.gpu_count", "", "run on this many GPUs, chosen by the scheduler"},
    {"placement", "gpus.placement", "",
     "how --gpu-count GPUs are picked (default: NVLink, then same NUMA, then any)"},
    {"tp", "tp_degree", "", "tensor-parallel ranks"},
    {"priority", "priority", "", "higher runs first; users share a priority fairly"},
    {"timeout", "timeout", "", "wall-clock limit once running (default: the daemon's)"},
    {"label", "labels", "", "attach a label"},
    {"warmup", "measurement.warmup_iterations", "", "untimed iterations first"},
    {"min-iters", "measurement.min_iterations", "", "timed samples at least"},
    {"max-iters", "measurement.max_iterations", "", "timed samples at most"},
    {"time-budget", "measurement.time_budget", "", "stop sampling after this long"},
    {"min-time", "measurement.min_time", "",
     "measured time before --noise may stop sampling (default 50ms; 0: none)"},
    {"noise", "measurement.noise_target", "",
     "stop once stddev/mean of the samples is below this (0.01 = 1%)"},
    {"l2", "measurement.l2_mode", "", "cold flushes L2 before every sample"},
    {"host-inputs", "measurement.host_inputs", "",
     "fill inputs on the host and check the whole output there (slower; default: on the GPU)"},
    {"graph", "measurement.graph_launches_per_sample", "",
     "launches per sample in a CUDA graph, so launch overhead is not timed"},
    {"eager-launches", "measurement.eager_launches_per_sample", "",
     "without a graph: launches per sample, queued back to back before the clock starts"},
    {"trace", "tracing.level", "", "CUPTI tracing (default: activity)"},
    {"metric", "tracing.extra_metrics", "NAME", "extra hardware metric (--trace metrics|full)"},
    {"user", "user", "NAME", "submit as this user (default: $USER)"},
    {"description", "description", "TEXT", "free text kept with the experiment"},
    {"capture", "capture.tool", "ncu|nsys",
     "run it again under Nsight Compute or Nsight Systems and keep the report (gpuprof report "
     "ID; docs/nsight.md)"},
    {"ncu-set", "capture.ncu_set", "SET", "--capture ncu's section set (default basic)"},
    {"ncu-kernel", "capture.kernel_filter", "NAME|regex:EXPR",
     "--capture ncu: the kernels to profile (default: all but the measurement's own)"},
    {"ncu-launch-skip", "capture.launch_skip", "", "--capture ncu: matching launches to skip"},
    {"ncu-launch-count", "capture.launch_count", "",
     "--capture ncu: matching launches to profile (default 1, at most 50)"},
};

// A kernel of the submitter's own (docs/custom-kernels.md), for the workloads that take one.
// Their help is the field's proto comment (workload_flag_help). --kernel-file sets no field
// itself: the CLI reads the file into custom_kernel.source (client/custom_kernel.h).
constexpr CommonFlag kCustomKernelFlags[] = {
    {"kernel-name", "custom_kernel.kernel_name", "NAME",
     "the extern \"C\" __global__ function to launch (default: the source's only one)"},
    {"block-threads", "custom_kernel.block_threads", "", ""},
    {"items-per-block", "custom_kernel.items_per_block", "", ""},
    {"dynamic-shared", "custom_kernel.dynamic_shared_bytes", "BYTES", ""},
    {"kernel-option", "custom_kernel.compile_options", "OPT", ""},
    {"mode", "custom_kernel.mode", "test|benchmark|profile|sanitize",
     "test: check only; benchmark (default): check, time, check again; profile: with hardware "
     "metrics and PC-sampling stalls; sanitize: check under compute-sanitizer"},
    {"sanitizer", "custom_kernel.sanitizer_tool", "memcheck|racecheck|initcheck|synccheck", ""},
};
constexpr absl::string_view kCustomKernelWorkloads[] = {"index", "store", "attention"};

const OneofDescriptor* WorkloadOneof() {
  return v1::ExperimentRequest::descriptor()->FindOneofByName(std::string(kWorkloadOneof));
}

// "num_tokens" -> "num-tokens".
std::string FlagNameForField(const FieldDescriptor* field) {
  return NormalizeFlagName(field->name());
}

FlagSpec FlagForField(const FieldDescriptor* field, std::string name, std::string help) {
  FlagSpec flag;
  flag.name = std::move(name);
  flag.is_switch = field->type() == FieldDescriptor::TYPE_BOOL && !field->is_repeated();
  flag.repeatable = field->is_repeated();
  flag.value_syntax = FieldValueSyntax(field);
  flag.help = std::move(help);
  return flag;
}

// The field path a dotted name from ExperimentRequest names.
absl::StatusOr<std::vector<const FieldDescriptor*>> RequestFieldPath(absl::string_view flag,
                                                                     absl::string_view dotted) {
  std::vector<const FieldDescriptor*> path;
  const Descriptor* type = v1::ExperimentRequest::descriptor();
  for (absl::string_view name : absl::StrSplit(dotted, '.')) {
    const FieldDescriptor* field =
        type == nullptr ? nullptr : type->FindFieldByName(std::string(name));
    if (field == nullptr) {
      return absl::InternalError(
          absl::StrCat("--", flag, ": ExperimentRequest has no field ", dotted));
    }
    path.push_back(field);
    type = field->message_type();
  }
  return path;
}

}  // namespace

bool TakesCustomKernel(absl::string_view workload) {
  for (absl::string_view name : kCustomKernelWorkloads) {
    if (name == workload) return true;
  }
  return false;
}

std::vector<std::string> CustomKernelFlagNames() {
  std::vector<std::string> names = {std::string(kKernelFileFlag)};
  for (const CommonFlag& flag : kCustomKernelFlags) names.emplace_back(flag.name);
  return names;
}

std::vector<std::string> WorkloadNames() {
  std::vector<std::string> names;
  const OneofDescriptor* oneof = WorkloadOneof();
  for (int i = 0; i < oneof->field_count(); ++i) names.push_back(oneof->field(i)->name());
  return names;
}

absl::StatusOr<ExperimentRequestBuilder> ExperimentRequestBuilder::ForWorkload(
    absl::string_view workload) {
  const FieldDescriptor* workload_field = nullptr;
  const OneofDescriptor* oneof = WorkloadOneof();
  for (int i = 0; i < oneof->field_count(); ++i) {
    if (oneof->field(i)->name() == workload) workload_field = oneof->field(i);
  }
  if (workload_field == nullptr) {
    const std::string closest = ClosestName(workload, WorkloadNames());
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown workload \"", workload, "\"",
        closest.empty() ? "" : absl::StrCat(" (did you mean ", closest, "?)"), "; choose one of ",
        absl::StrJoin(WorkloadNames(), ", ")));
  }
  ExperimentRequestBuilder builder(workload_field);

  // Common flags first: their names stay the same across workloads.
  absl::flat_hash_set<std::string> taken_names;
  const Descriptor* request_type = v1::ExperimentRequest::descriptor();
  for (const CommonFlag& common : kCommonFlags) {
    FieldPath path;
    const Descriptor* type = request_type;
    for (absl::string_view name : absl::StrSplit(common.path, '.')) {
      const FieldDescriptor* field =
          type == nullptr ? nullptr : type->FindFieldByName(std::string(name));
      if (field == nullptr) {
        return absl::InternalError(
            absl::StrCat("--", common.name, ": ExperimentRequest has no field ", common.path));
      }
      path.push_back(field);
      type = field->message_type();
    }
    FlagSpec flag = FlagForField(path.back(), std::string(common.name), std::string(common.help));
    if (!common.value_syntax.empty()) flag.value_syntax = std::string(common.value_syntax);
    taken_names.insert(flag.name);
    builder.path_by_flag_[flag.name] = std::move(path);
    builder.common_flags_.push_back(std::move(flag));
  }

  const Descriptor* spec_type = workload_field->message_type();
  for (int i = 0; i < spec_type->field_count(); ++i)
    taken_names.insert(FlagNameForField(spec_type->field(i)));
  for (int i = 0; i < spec_type->field_count(); ++i) {
    const FieldDescriptor* field = spec_type->field(i);
    if (!IsSettableFromText(field)) {
      builder.unsettable_fields_.push_back(field->name());
      continue;
    }
    std::string name = FlagNameForField(field);
    // A spec field named like a common flag keeps a qualified name: "--index.priority".
    if (builder.path_by_flag_.contains(name)) name = absl::StrCat(workload, ".", name);
    FlagSpec flag = FlagForField(field, name, FieldTypeName(field));
    for (const FieldAlias& alias : kFieldAliases) {
      if (alias.field == field->name() && taken_names.insert(std::string(alias.alias)).second) {
        flag.aliases.push_back(std::string(alias.alias));
      }
    }
    builder.path_by_flag_[flag.name] = FieldPath{workload_field, field};
    builder.workload_flags_.push_back(std::move(flag));
  }

  if (TakesCustomKernel(workload)) {
    builder.custom_kernel_flags_.push_back(
        {.name = std::string(kKernelFileFlag),
         .value_syntax = "PATH",
         .help = "run this CUDA source's kernel in place of ours (at most 256 KiB; "
                 "docs/custom-kernels.md)"});
    for (const CommonFlag& custom : kCustomKernelFlags) {
      absl::StatusOr<FieldPath> path = RequestFieldPath(custom.name, custom.path);
      if (!path.ok()) return path.status();
      FlagSpec flag =
          FlagForField(path->back(), std::string(custom.name), std::string(custom.help));
      if (!custom.value_syntax.empty()) flag.value_syntax = std::string(custom.value_syntax);
      builder.path_by_flag_[flag.name] = *std::move(path);
      builder.custom_kernel_flags_.push_back(std::move(flag));
    }
  }
  return builder;
}

const FieldDescriptor* ExperimentRequestBuilder::FieldForFlag(absl::string_view flag_name) const {
  const auto it = path_by_flag_.find(std::string(flag_name));
  return it == path_by_flag_.end() ? nullptr : it->second.back();
}

std::vector<const FieldDescriptor*> ExperimentRequestBuilder::FieldPathForFlag(
    absl::string_view flag_name) const {
  const auto it = path_by_flag_.find(std::string(flag_name));
  return it == path_by_flag_.end() ? FieldPath() : it->second;
}

std::string ExperimentRequestBuilder::ApiFieldName(absl::string_view flag_name) const {
  const auto it = path_by_flag_.find(std::string(flag_name));
  if (it == path_by_flag_.end()) return "";
  const FieldPath& path = it->second;
  if (path.front() == workload_field_) return path.back()->name();
  std::vector<std::string> names;
  for (const FieldDescriptor* field : path) names.push_back(field->name());
  return absl::StrJoin(names, ".");
}

absl::StatusOr<v1::ExperimentRequest> ExperimentRequestBuilder::Build(
    const ParsedArgs& args) const {
  v1::ExperimentRequest request;
  request.GetReflection()->MutableMessage(&request, workload_field_);
  for (const FlagValue& flag : args.flags) {
    const auto it = path_by_flag_.find(flag.name);
    if (it == path_by_flag_.end()) continue;
    const FieldPath& path = it->second;
    Message* message = &request;
    for (size_t i = 0; i + 1 < path.size(); ++i) {
      message = message->GetReflection()->MutableMessage(message, path[i]);
    }
    // The daemon cannot parse a request whose text is not UTF-8: say so here, naming the flag.
    absl::Status status = CheckUtf8(absl::StrCat("--", flag.typed_name), flag.value);
    if (!status.ok()) return status;
    status = SetFieldFromText(message, path.back(), flag.value);
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag.typed_name, ": ", status.message()));
    }
  }
  return request;
}

}  // namespace gpuprof::client
