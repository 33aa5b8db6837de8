#include "daemon/admission/request_validation.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/terminal_text.h"
#include "daemon/admission/capture_validation.h"
#include "daemon/admission/custom_kernel_validation.h"
#include "daemon/scheduling/gpu_placement.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/util/time_util.h"
#include "workloads/spec_checks.h"
#include "workloads/spec_table.h"

namespace gpuprof::daemon {
namespace {

using ::gpuprof::workloads::CheckRange;
using ::gpuprof::workloads::RequiredGpuCount;
using ::gpuprof::workloads::SetIfZero;
using ::gpuprof::workloads::WorkloadName;
using ::gpuprof::workloads::WorkloadSpec;

using ::google::protobuf::util::TimeUtil;

constexpr int64_t kMaxLabels = 32;
constexpr size_t kMaxUserBytes = 64;
constexpr int kMaxPriority = 100;

constexpr size_t kExcerptBytes = 64;
// google.protobuf.Duration's own range: +-10,000 years.
constexpr int64_t kMaxDurationSeconds = 315'576'000'000;
constexpr int32_t kMaxDurationNanos = 999'999'999;

absl::Status CheckDuration(absl::string_view field, const google::protobuf::Duration& duration) {
  const int64_t seconds = duration.seconds();
  const int32_t nanos = duration.nanos();
  if (seconds < 0 || seconds > kMaxDurationSeconds || nanos < 0 || nanos > kMaxDurationNanos) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: got a Duration of seconds %d, nanos %d; must not be negative, with seconds in "
        "[0, %d] and nanos in [0, %d]",
        field, seconds, nanos, kMaxDurationSeconds, kMaxDurationNanos));
  }
  return absl::OkStatus();
}

// Zero means "the default" in every field; GPU workloads have their defaults applied before
// this, CPU workloads keep zeros (they take no measurement options), so one check serves both.
absl::Status ValidateMeasurement(const v1::MeasurementOptions& options) {
  RETURN_IF_ERROR(
      CheckRange("measurement.warmup_iterations", options.warmup_iterations(), 0, 100'000));
  if (options.min_iterations() != 0) {
    RETURN_IF_ERROR(
        CheckRange("measurement.min_iterations", options.min_iterations(), 1, 1'000'000));
  }
  if (options.max_iterations() != 0) {
    RETURN_IF_ERROR(CheckRange("measurement.max_iterations", options.max_iterations(),
                               std::max(1, options.min_iterations()), 1'000'000));
  }
  if (options.time_budget().seconds() != 0 || options.time_budget().nanos() != 0) {
    RETURN_IF_ERROR(CheckRange("measurement.time_budget (ms)",
                               TimeUtil::DurationToMilliseconds(options.time_budget()), 1,
                               600'000));
  }
  // 0 is allowed: an explicit "no time floor" (unset takes the default).
  if (options.has_min_time()) {
    RETURN_IF_ERROR(CheckRange("measurement.min_time (ms)",
                               TimeUtil::DurationToMilliseconds(options.min_time()), 0,
                               600'000));
  }
  if (!(options.noise_target() >= 0.0 && options.noise_target() < 1.0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "measurement.noise_target: got %g; must be in [0, 1)", options.noise_target()));
  }
  RETURN_IF_ERROR(CheckRange("measurement.graph_launches_per_sample",
                             options.graph_launches_per_sample(), 0, 10'000));
  RETURN_IF_ERROR(CheckRange("measurement.eager_launches_per_sample",
                             options.eager_launches_per_sample(), 0, 1'000));
  if (options.graph_launches_per_sample() > 0 && options.eager_launches_per_sample() > 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "measurement.eager_launches_per_sample: got %d with graph_launches_per_sample %d; a "
        "sample is either a graph or a batch of eager launches, set one of them",
        options.eager_launches_per_sample(), options.graph_launches_per_sample()));
  }
  return absl::OkStatus();
}

// " (U+000A (newline) at byte 1)" when `text` holds an unsafe character, else "".
std::string UnsafeCharacterNote(absl::string_view text) {
  const std::optional<UnsafeCharacter> unsafe = FindUnsafeCharacter(text);
  if (!unsafe.has_value()) return "";
  return absl::StrFormat(" (%s at byte %d)", DescribeUnsafeCharacter(*unsafe), unsafe->byte_offset);
}

bool IsLabelKeyChar(char c) {
  return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-' || c == '/';
}

absl::Status ValidateLabels(const v1::ExperimentRequest& request, const ValidationLimits& limits) {
  if (request.labels_size() > kMaxLabels) {
    return absl::InvalidArgumentError(absl::StrFormat("labels: got %d labels; at most %d allowed",
                                                      request.labels_size(), kMaxLabels));
  }
  // Sorted so that the first bad label named is the same however the map was decoded.
  std::vector<std::pair<absl::string_view, absl::string_view>> labels(request.labels().begin(),
                                                                      request.labels().end());
  std::sort(labels.begin(), labels.end());
  for (const auto& [key, value] : labels) {
    if (key.empty() || key.size() > kMaxLabelKeyBytes ||
        !std::all_of(key.begin(), key.end(), IsLabelKeyChar)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "labels: key \"%s\"%s is not allowed; keys are 1-%d characters of [A-Za-z0-9._/-]",
          absl::CEscape(key.substr(0, 80)), UnsafeCharacterNote(key), kMaxLabelKeyBytes));
    }
    if (value.size() > kMaxLabelValueBytes) {
      return absl::InvalidArgumentError(
          absl::StrFormat("labels[%s]: value of %d bytes; at most %d allowed", key, value.size(),
                          kMaxLabelValueBytes));
    }
    RETURN_IF_ERROR(CheckPrintableText(absl::StrCat("labels[", key, "]"), value));
    if (key == kFaultLabel) {
      if (!limits.allow_test_faults) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "labels[%s]: fault injection is disabled on this daemon (it is for tests: start "
            "gpuprofd with --enable_test_faults)",
            key));
      }
      // "crash" on every rank, or "crash@1" on rank 1 only (the others carry on into NCCL).
      const std::optional<FaultLabel> fault = ParseFaultLabel(value);
      if (!fault.has_value() || fault->rank.value_or(0) >= std::max(1, request.tp_degree())) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "labels[%s]: got \"%s\"; must be one of crash, hang, exit, cuda-error, optionally "
            "followed by @RANK (a rank below tp_degree)",
            key, value));
      }
    }
  }
  return absl::OkStatus();
}

// Called after CheckWellFormed: every Duration is valid and not negative.
absl::Status ValidateCommon(const v1::ExperimentRequest& request, const ValidationLimits& limits) {
  const std::string& user = request.user();
  if (user.empty() || user.size() > kMaxUserBytes ||
      !std::all_of(user.begin(), user.end(), [](char c) {
        return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-' || c == '@';
      })) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "user: got \"%s\"%s; must be 1-%d characters of [A-Za-z0-9._@-]",
        absl::CEscape(user.substr(0, 80)), UnsafeCharacterNote(user), kMaxUserBytes));
  }
  if (request.description().size() > kMaxDescriptionBytes) {
    return absl::InvalidArgumentError(absl::StrFormat("description: %d bytes; at most %d allowed",
                                                      request.description().size(),
                                                      kMaxDescriptionBytes));
  }
  RETURN_IF_ERROR(CheckPrintableText("description", request.description()));
  RETURN_IF_ERROR(CheckRange("priority", request.priority(), -kMaxPriority, kMaxPriority));
  const int64_t timeout_s = TimeUtil::DurationToSeconds(request.timeout());
  RETURN_IF_ERROR(
      CheckRange("timeout (seconds)", timeout_s, 1, absl::ToInt64Seconds(limits.max_timeout)));
  RETURN_IF_ERROR(ValidateLabels(request, limits));
  for (int i = 0; i < request.tracing().extra_metrics_size(); ++i) {
    const std::string& metric = request.tracing().extra_metrics(i);
    if (metric.empty() || metric.size() > 256) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tracing.extra_metrics[%d]: must be a metric name of 1-256 characters", i));
    }
    RETURN_IF_ERROR(CheckPrintableText(absl::StrFormat("tracing.extra_metrics[%d]", i), metric));
  }
  if (request.tracing().extra_metrics_size() > 64) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tracing.extra_metrics: got %d names; at most 64 allowed",
                        request.tracing().extra_metrics_size()));
  }
  // Every workload: a CPU one ignores these options, but a stored -1 would still be a lie.
  return ValidateMeasurement(request.measurement());
}

// Checks of the GPU selection that need no inventory: ids, counts and the TP degree agree.
absl::Status ValidateGpuSelectionShape(const v1::ExperimentRequest& request,
                                       const WorkloadSpec& spec) {
  const auto& selection = request.gpus();
  std::set<int> seen;
  for (int i = 0; i < selection.gpu_ids_size(); ++i) {
    const int id = selection.gpu_ids(i);
    if (id < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("gpus.gpu_ids[%d]: got %d; GPU ids are >= 0", i, id));
    }
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("gpus.gpu_ids[%d]: GPU %d is listed twice", i, id));
    }
  }
  RETURN_IF_ERROR(CheckRange("gpus.gpu_count", selection.gpu_count(), 0, 1024));
  if (selection.gpu_ids_size() > 0 && selection.gpu_count() != 0 &&
      selection.gpu_count() != selection.gpu_ids_size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "gpus.gpu_count: got %d with %d explicit gpu_ids; give ids or a count, not both",
        selection.gpu_count(), selection.gpu_ids_size()));
  }
  if (!spec.uses_gpu) {
    if (selection.gpu_ids_size() > 0 || selection.gpu_count() > 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "gpus: %s runs on the CPU; leave the GPU selection empty", WorkloadName(request)));
    }
    return CheckRange("tp_degree", request.tp_degree(), 0, 1);
  }
  const int gpu_set = RequiredGpuCount(spec, request);
  RETURN_IF_ERROR(CheckRange("tp_degree", request.tp_degree(), 1, 1024));
  if (request.tp_degree() > gpu_set) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tp_degree: got %d; must be at most the number of GPUs selected (%d)",
                        request.tp_degree(), gpu_set));
  }
  if (spec.supports_tensor_parallelism) {
    if (request.tp_degree() > 1 && request.tp_degree() != gpu_set) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tp_degree: got %d with %d GPUs selected; %s runs one rank per GPU, so they must be "
          "equal",
          request.tp_degree(), gpu_set, WorkloadName(request)));
    }
  } else if (request.tp_degree() > 1) {
    std::vector<std::string> parallel;
    for (const auto* known : workloads::WorkloadSpecs()) {
      if (known->supports_tensor_parallelism) parallel.push_back(WorkloadName(known->request_case));
    }
    return absl::InvalidArgumentError(absl::StrFormat(
        "tp_degree: got %d; %s runs on one rank in this build (tensor parallelism: %s)",
        request.tp_degree(), WorkloadName(request), absl::StrJoin(parallel, ", ")));
  }
  return absl::OkStatus();
}

absl::Status ValidateGpuSelectionOnHost(const v1::ExperimentRequest& request,
                                        const WorkloadSpec& spec,
                                        const v1::ListGpusResponse& inventory) {
  const int host_gpus = inventory.gpus_size();
  const auto& selection = request.gpus();
  for (int i = 0; i < selection.gpu_ids_size(); ++i) {
    if (selection.gpu_ids(i) >= host_gpus) {
      return absl::InvalidArgumentError(
          absl::StrFormat("gpus.gpu_ids[%d]: GPU %d does not exist; this host has GPUs 0-%d", i,
                          selection.gpu_ids(i), host_gpus - 1));
    }
  }
  const int needed = RequiredGpuCount(spec, request);
  if (needed > host_gpus) {
    return absl::InvalidArgumentError(
        absl::StrFormat("gpus.gpu_count: needs %d GPUs; this host has %d", needed, host_gpus));
  }
  // A placement no free-for-all host could satisfy would wait forever: refuse it now.
  std::set<int> all;
  for (int i = 0; i < host_gpus; ++i) all.insert(i);
  if (!ChooseGpus(selection, needed, GpuTopology(inventory), all).has_value()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("gpus.placement: no set of %d GPUs on this host satisfies %s", needed,
                        v1::GpuSelection::Placement_Name(selection.placement())));
  }
  return absl::OkStatus();
}

// ApplyRequestDefaults with the request's spec (nullptr: no workload set) already looked up.
void ApplyDefaults(const WorkloadSpec* spec, const ValidationLimits& limits,
                   const v1::ListGpusResponse& inventory, v1::ExperimentRequest& request) {
  if (spec != nullptr) spec->apply_defaults(inventory, request);
  // Before the tracing default: a profiled custom kernel traces at LEVEL_FULL.
  ApplyCustomKernelDefaults(request);
  ApplyCaptureDefaults(request);
  const bool uses_gpu = spec != nullptr && spec->uses_gpu;
  // Workloads that run one process per rank chose their degree above; the others run as one.
  if (uses_gpu && request.tp_degree() == 0) request.set_tp_degree(1);
  // Measurement and tracing options mean nothing to CPU workloads; keep their requests clean.
  if (uses_gpu) {
    auto& measurement = *request.mutable_measurement();
    // Unset only: an explicit 0 (no warm-up) is honoured.
    if (!measurement.has_warmup_iterations()) measurement.set_warmup_iterations(10);
    // The floor under the noise target (nvbench's min samples and min time): 100 samples so
    // that p99 is not the maximum, 50 ms of measured GPU time so that a short kernel's noise
    // does not rest on a millisecond of data. Unset min_time only: an explicit 0 is honoured.
    SetIfZero(measurement.min_iterations(), [&] { measurement.set_min_iterations(100); });
    if (!measurement.has_min_time()) {
      *measurement.mutable_min_time() = TimeUtil::MillisecondsToDuration(50);
    }
    SetIfZero(measurement.max_iterations(), [&] {
      measurement.set_max_iterations(std::max(1000, measurement.min_iterations()));
    });
    // Compared field by field: an invalid Duration (refused later) must not overflow here.
    if (measurement.time_budget().seconds() == 0 && measurement.time_budget().nanos() == 0) {
      *measurement.mutable_time_budget() = TimeUtil::SecondsToDuration(2);
    }
    // Unset only: an explicit 0 samples on to max_iterations or the time budget.
    if (!measurement.has_noise_target()) measurement.set_noise_target(0.01);
    SetIfZero(measurement.l2_mode(),
              [&] { measurement.set_l2_mode(v1::MeasurementOptions::L2_MODE_HOT); });
    SetIfZero(request.tracing().level(),
              [&] { request.mutable_tracing()->set_level(v1::TracingOptions::LEVEL_ACTIVITY); });
  }
  if (request.timeout().seconds() == 0 && request.timeout().nanos() == 0) {
    *request.mutable_timeout() =
        TimeUtil::SecondsToDuration(absl::ToInt64Seconds(limits.default_timeout));
  }
}

// ValidateExperimentRequest with the request's spec already looked up.
absl::Status Validate(const WorkloadSpec* spec, const v1::ExperimentRequest& request,
                      const v1::ListGpusResponse& inventory, const ValidationLimits& limits) {
  if (spec == nullptr) {
    std::vector<std::string> names;
    for (const auto* known : workloads::WorkloadSpecs()) {
      names.push_back(WorkloadName(known->request_case));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("workload: not set; must be one of ", absl::StrJoin(names, ", ")));
  }
  RETURN_IF_ERROR(spec->validate(request, workloads::HostLimitsOf(inventory)));
  // Unknown enum values and invalid Durations anywhere, before any Duration is converted.
  RETURN_IF_ERROR(CheckWellFormed(request));
  RETURN_IF_ERROR(ValidateCommon(request, limits));
  RETURN_IF_ERROR(ValidateCustomKernel(request, limits.custom_kernel_max_source_bytes));
  RETURN_IF_ERROR(ValidateCapture(request, spec->uses_gpu, limits.capture_tools));
  RETURN_IF_ERROR(ValidateGpuSelectionShape(request, *spec));
  const std::string workload = WorkloadName(request);
  if (spec->uses_gpu && inventory.gpus_size() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        workload, " runs on a GPU and this host has none",
        inventory.probe_error().empty() ? "" : absl::StrCat(" (", inventory.probe_error(), ")")));
  }
  const auto& supported = inventory.supported_workloads();
  if (std::find(supported.begin(), supported.end(), workload) == supported.end()) {
    return absl::UnimplementedError(
        absl::StrFormat("workload %s is not available in this build of gpuprof (available: %s)",
                        workload, absl::StrJoin(supported, ", ")));
  }
  if (spec->uses_gpu) RETURN_IF_ERROR(ValidateGpuSelectionOnHost(request, *spec, inventory));
  return absl::OkStatus();
}

}  // namespace

void ApplyRequestDefaults(const ValidationLimits& limits, const v1::ListGpusResponse& inventory,
                          v1::ExperimentRequest& request) {
  ApplyDefaults(workloads::FindWorkloadSpec(request.workload_case()), limits, inventory, request);
}

absl::Status ApplyDefaultsAndValidate(const ValidationLimits& limits,
                                      const v1::ListGpusResponse& inventory,
                                      v1::ExperimentRequest& request) {
  // The spec is looked up once per request; the defaults and every check are given it.
  const WorkloadSpec* spec = workloads::FindWorkloadSpec(request.workload_case());
  ApplyDefaults(spec, limits, inventory, request);
  return Validate(spec, request, inventory, limits);
}

absl::Status CheckPrintableText(absl::string_view field, absl::string_view text) {
  const std::optional<UnsafeCharacter> unsafe = FindUnsafeCharacter(text);
  if (!unsafe.has_value()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: %s at byte %d is not allowed; must be printable UTF-8 text without control "
      "characters (U+0000-U+001F, U+007F-U+009F; newlines and tabs included) or bidirectional "
      "formatting characters (U+061C, U+200E, U+200F, U+2028, U+2029, U+202A-U+202E, "
      "U+2066-U+2069): other users' terminals show it",
      field, DescribeUnsafeCharacter(*unsafe), unsafe->byte_offset));
}

absl::Status ValidateSweepRequestText(const v1::SweepRequest& request) {
  RETURN_IF_ERROR(CheckPrintableText("description", request.description()));
  RETURN_IF_ERROR(CheckPrintableText("user", request.user()));
  for (int i = 0; i < request.axes_size(); ++i) {
    const v1::SweepAxis& axis = request.axes(i);
    RETURN_IF_ERROR(CheckPrintableText(absl::StrFormat("axes[%d].field", i), axis.field()));
    for (int k = 0; k < axis.values_size(); ++k) {
      RETURN_IF_ERROR(
          CheckPrintableText(absl::StrFormat("axes[%d].values[%d]", i, k), axis.values(k)));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateBaselineText(const v1::SaveBaselineRequest& request) {
  RETURN_IF_ERROR(CheckPrintableText("name", request.name()));
  return CheckPrintableText("description", request.description());
}

absl::Status ValidateExperimentRequest(const v1::ExperimentRequest& request,
                                       const v1::ListGpusResponse& inventory,
                                       const ValidationLimits& limits) {
  return Validate(workloads::FindWorkloadSpec(request.workload_case()), request, inventory, limits);
}

std::string BoundedExcerpt(absl::string_view text) {
  if (text.size() <= kExcerptBytes) {
    return absl::StrCat("\"", EscapeForTerminal(text), "\" (", text.size(), " bytes)");
  }
  return absl::StrCat("\"", EscapeForTerminal(text.substr(0, kExcerptBytes)), "\"... (",
                      text.size(), " bytes)");
}

namespace {

using ::google::protobuf::Descriptor;
using ::google::protobuf::EnumDescriptor;
using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::Message;
using ::google::protobuf::Reflection;

std::string EnumNames(const EnumDescriptor& type) {
  std::vector<std::string> names;
  for (int i = 0; i < type.value_count(); ++i) names.push_back(type.value(i)->name());
  return absl::StrJoin(names, ", ");
}

absl::Status CheckEnumValue(const std::string& path, const FieldDescriptor& field, int value) {
  if (field.enum_type()->FindValueByNumber(value) != nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: got %d, which %s does not name; must be one of %s", path, value,
                      field.enum_type()->full_name(), EnumNames(*field.enum_type())));
}

absl::Status CheckMessage(const Message& message, const std::string& path);

absl::Status CheckField(const Message& message, const FieldDescriptor& field,
                        const std::string& path) {
  const Reflection& reflection = *message.GetReflection();
  if (field.is_repeated()) {
    const int size = reflection.FieldSize(message, &field);
    for (int i = 0; i < size; ++i) {
      const std::string element = absl::StrCat(path, "[", i, "]");
      if (field.cpp_type() == FieldDescriptor::CPPTYPE_ENUM) {
        RETURN_IF_ERROR(
            CheckEnumValue(element, field, reflection.GetRepeatedEnumValue(message, &field, i)));
      } else if (field.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        RETURN_IF_ERROR(CheckMessage(reflection.GetRepeatedMessage(message, &field, i), element));
      }
    }
    return absl::OkStatus();
  }
  if (field.cpp_type() == FieldDescriptor::CPPTYPE_ENUM) {
    return CheckEnumValue(path, field, reflection.GetEnumValue(message, &field));
  }
  if (field.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    return CheckMessage(reflection.GetMessage(message, &field), path);
  }
  return absl::OkStatus();
}

absl::Status CheckMessage(const Message& message, const std::string& path) {
  const Descriptor& type = *message.GetDescriptor();
  if (type.full_name() == google::protobuf::Duration::descriptor()->full_name()) {
    google::protobuf::Duration duration;
    duration.CopyFrom(message);
    return CheckDuration(path.empty() ? "duration" : path, duration);
  }
  // Only the fields that are set: an unset message field cannot hold a bad value.
  std::vector<const FieldDescriptor*> fields;
  message.GetReflection()->ListFields(message, &fields);
  for (const FieldDescriptor* field : fields) {
    RETURN_IF_ERROR(CheckField(
        message, *field, path.empty() ? field->name() : absl::StrCat(path, ".", field->name())));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckWellFormed(const google::protobuf::Message& message) {
  return CheckMessage(message, "");
}

}  // namespace gpuprof::daemon
