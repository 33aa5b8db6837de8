#include "sweep/sweep_expansion.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/enum_names.h"
#include "common/field_text.h"
#include "common/status_macros.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/duration.pb.h"

namespace gpuprof::sweep {
namespace {

using ::google::protobuf::Descriptor;
using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::Message;
using ::google::protobuf::Reflection;

bool IsIntegerField(const FieldDescriptor* field) {
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
      return !field->is_repeated();
    default:
      return false;
  }
}

// Axis values as the sweep tables show them (six significant digits).
std::string ShortNumber(double value) { return absl::StrCat(value); }

std::string AxisError(absl::string_view axis, absl::string_view what) {
  return absl::StrCat("axis \"", axis, "\": ", what);
}

}  // namespace

absl::StatusOr<FieldPath> ResolveAxisField(const v1::ExperimentRequest& base,
                                           absl::string_view name) {
  const Descriptor* request_type = v1::ExperimentRequest::descriptor();
  const google::protobuf::OneofDescriptor* workloads = request_type->FindOneofByName("workload");
  const FieldDescriptor* workload_field =
      base.GetReflection()->GetOneofFieldDescriptor(base, workloads);
  if (workload_field == nullptr) {
    return absl::InvalidArgumentError("base: no workload set (index, store, attention, ...)");
  }
  if (name.empty()) return absl::InvalidArgumentError("axes: an axis has no field name");
  const std::vector<std::string> parts = absl::StrSplit(name, '.');
  FieldPath path;
  const Descriptor* type = request_type;
  if (parts.size() == 1) {
    const FieldDescriptor* spec_field =
        workload_field->message_type()->FindFieldByName(parts[0]);
    if (spec_field != nullptr) return FieldPath{workload_field, spec_field};
  }
  for (const std::string& part : parts) {
    const FieldDescriptor* field = type == nullptr ? nullptr : type->FindFieldByName(part);
    if (field == nullptr) {
      std::vector<std::string> spec_fields;
      const Descriptor* spec = workload_field->message_type();
      for (int i = 0; i < spec->field_count(); ++i) spec_fields.push_back(spec->field(i)->name());
      return absl::InvalidArgumentError(AxisError(
          name, absl::StrCat("no such field; use a field of ", spec->name(), " (",
                             absl::StrJoin(spec_fields, ", "),
                             ") or a path from ExperimentRequest such as "
                             "\"measurement.l2_mode\" or \"tp_degree\"")));
    }
    if (field->containing_oneof() == workloads && field != workload_field) {
      return absl::InvalidArgumentError(AxisError(
          name, absl::StrCat("the sweep's workload is ", workload_field->name())));
    }
    path.push_back(field);
    type = field->message_type();
    // Settable messages (durations, ranges) end the path.
    if (type != nullptr && IsSettableFromText(field) && &part != &parts.back()) {
      return absl::InvalidArgumentError(
          AxisError(name, absl::StrCat(field->name(), " is set as a whole")));
    }
  }
  const FieldDescriptor* last = path.back();
  if (last->containing_oneof() == workloads) {
    return absl::InvalidArgumentError(
        AxisError(name, "names the workload itself; name one of its fields"));
  }
  if (!IsSettableFromText(last)) {
    return absl::InvalidArgumentError(
        AxisError(name, absl::StrCat("a ", FieldTypeName(last),
                                     " field cannot take values from text")));
  }
  return path;
}

std::string FieldValueText(const v1::ExperimentRequest& request, const FieldPath& path) {
  const Message* message = &request;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    message = &message->GetReflection()->GetMessage(*message, path[i]);
  }
  const FieldDescriptor* field = path.back();
  if (!field->is_repeated()) return FieldValueAsText(*message, field, -1, ShortNumber);
  std::vector<std::string> values;
  const int size = message->GetReflection()->FieldSize(*message, field);
  for (int i = 0; i < size; ++i) values.push_back(FieldValueAsText(*message, field, i, ShortNumber));
  if (field->is_map()) std::sort(values.begin(), values.end());
  return absl::StrJoin(values, ",");
}

std::string KernelAxisValue(const v1::ExperimentRequest& request) {
  // A listing leaves the source out but keeps the file's name.
  if (request.custom_kernel().source().empty() && request.custom_kernel().file_name().empty()) {
    return std::string(kOurKernel);
  }
  return request.custom_kernel().file_name().empty() ? "kernel.cu"
                                                     : request.custom_kernel().file_name();
}

absl::StatusOr<std::vector<std::string>> AxisValues(const v1::SweepAxis& axis,
                                                    const FieldPath& path) {
  const int kinds = (axis.values_size() > 0 ? 1 : 0) + (axis.has_range() ? 1 : 0) +
                    (axis.has_powers_of_two() ? 1 : 0);
  if (kinds != 1) {
    return absl::InvalidArgumentError(AxisError(
        axis.field(), kinds == 0 ? "no values: give values, a range or powers_of_two"
                                 : "give only one of values, range and powers_of_two"));
  }
  std::vector<std::string> values;
  if (axis.values_size() > 0) {
    values.assign(axis.values().begin(), axis.values().end());
    return values;
  }
  if (!IsIntegerField(path.back())) {
    return absl::InvalidArgumentError(AxisError(
        axis.field(), absl::StrCat("ranges and powers of two need an integer field; ",
                                   path.back()->name(), " is ",
                                   FieldTypeName(path.back()))));
  }
  if (axis.has_range()) {
    const v1::IntegerRange& range = axis.range();
    const int64_t step = range.step() == 0 ? 1 : range.step();
    if (step < 0) {
      return absl::InvalidArgumentError(
          AxisError(axis.field(), absl::StrCat("range step ", step, " must be positive")));
    }
    if (range.end() < range.start()) {
      return absl::InvalidArgumentError(AxisError(
          axis.field(),
          absl::StrCat("range end ", range.end(), " is below its start ", range.start())));
    }
    if ((range.end() - range.start()) / step >= kMaxSweepPoints) {
      return absl::InvalidArgumentError(AxisError(
          axis.field(), absl::StrCat("range ", range.start(), ":", range.end(), ":", step,
                                     " has more than ", kMaxSweepPoints, " values")));
    }
    for (int64_t value = range.start(); value <= range.end(); value += step) {
      values.push_back(absl::StrCat(value));
      if (range.end() - value < step) break;  // no overflow past end
    }
    return values;
  }
  const v1::PowersOfTwo& powers = axis.powers_of_two();
  if (powers.min() <= 0 || powers.max() < powers.min()) {
    return absl::InvalidArgumentError(AxisError(
        axis.field(), absl::StrCat("powers of two from ", powers.min(), " to ", powers.max(),
                                   ": need 0 < min <= max")));
  }
  for (int shift = 0; shift < 63; ++shift) {
    const int64_t value = int64_t{1} << shift;
    if (value > powers.max()) break;
    if (value >= powers.min()) values.push_back(absl::StrCat(value));
  }
  if (values.empty()) {
    return absl::InvalidArgumentError(AxisError(
        axis.field(),
        absl::StrCat("no power of two lies in [", powers.min(), ", ", powers.max(), "]")));
  }
  return values;
}

absl::StatusOr<std::vector<ExpandedPoint>> ExpandSweep(const v1::SweepRequest& request) {
  struct Axis {
    std::string name;
    FieldPath path;  // empty for the kernel axis
    std::vector<std::string> values;
    // The kernel axis: the kernel of each value (SweepAxis.kernels).
    std::vector<const v1::CustomKernel*> kernels;
  };
  std::vector<Axis> axes;
  std::set<std::string> seen;
  for (const v1::SweepAxis& axis : request.axes()) {
    if (axis.field() == kKernelAxis) {
      if (axis.values_size() == 0 || axis.values_size() != axis.kernels_size() ||
          axis.has_range() || axis.has_powers_of_two()) {
        return absl::InvalidArgumentError(AxisError(
            axis.field(), "needs a kernel for each value (kernels and values of equal length)"));
      }
      if (!seen.insert(std::string(kKernelAxis)).second) {
        return absl::InvalidArgumentError(AxisError(axis.field(), "given twice"));
      }
      Axis kernel_axis{axis.field(), {}, {axis.values().begin(), axis.values().end()}, {}};
      for (const v1::CustomKernel& kernel : axis.kernels()) kernel_axis.kernels.push_back(&kernel);
      axes.push_back(std::move(kernel_axis));
      continue;
    }
    if (axis.kernels_size() > 0) {
      return absl::InvalidArgumentError(
          AxisError(axis.field(), absl::StrCat("kernels belong to the \"", kKernelAxis,
                                               "\" axis only")));
    }
    ASSIGN_OR_RETURN(FieldPath path, ResolveAxisField(request.base(), axis.field()));
    std::string key;
    for (const auto* field : path) absl::StrAppend(&key, field->full_name(), "/");
    if (!seen.insert(key).second) {
      return absl::InvalidArgumentError(
          AxisError(axis.field(), "the same field is swept by two axes"));
    }
    ASSIGN_OR_RETURN(std::vector<std::string> values, AxisValues(axis, path));
    // Each value must parse for its field before any point is built.
    for (const std::string& value : values) {
      v1::ExperimentRequest probe = request.base();
      Message* message = &probe;
      for (size_t i = 0; i + 1 < path.size(); ++i) {
        message = message->GetReflection()->MutableMessage(message, path[i]);
      }
      message->GetReflection()->ClearField(message, path.back());
      const absl::Status parsed = SetFieldFromText(message, path.back(), value);
      if (!parsed.ok()) {
        return absl::InvalidArgumentError(AxisError(
            axis.field(), absl::StrCat("value \"", value, "\": ", parsed.message())));
      }
    }
    axes.push_back(Axis{axis.field(), std::move(path), std::move(values)});
  }

  const bool zipped = request.combination() == v1::SweepRequest::ZIPPED;
  int64_t count = axes.empty() ? 1 : (zipped ? static_cast<int64_t>(axes[0].values.size()) : 1);
  for (const Axis& axis : axes) {
    if (zipped) {
      if (axis.values.size() != axes[0].values.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "zipped axes need equal lengths: axis \"", axes[0].name, "\" has ",
            axes[0].values.size(), " values, axis \"", axis.name, "\" has ",
            axis.values.size()));
      }
    } else {
      count *= static_cast<int64_t>(axis.values.size());
      if (count > kMaxSweepPoints) break;
    }
  }
  if (count > kMaxSweepPoints) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the sweep has more than ", kMaxSweepPoints, " points; split it or zip axes"));
  }

  std::vector<ExpandedPoint> points;
  points.reserve(count);
  for (int64_t index = 0; index < count; ++index) {
    ExpandedPoint point;
    point.request = request.base();
    // Cartesian: index in mixed radix, the last axis the fastest digit.
    int64_t rest = index;
    std::vector<size_t> choice(axes.size());
    for (size_t a = axes.size(); a-- > 0;) {
      if (zipped) {
        choice[a] = static_cast<size_t>(index);
      } else {
        choice[a] = static_cast<size_t>(rest % static_cast<int64_t>(axes[a].values.size()));
        rest /= static_cast<int64_t>(axes[a].values.size());
      }
    }
    for (size_t a = 0; a < axes.size(); ++a) {
      if (axes[a].path.empty()) continue;  // the kernel axis, set last
      Message* message = &point.request;
      for (size_t i = 0; i + 1 < axes[a].path.size(); ++i) {
        message = message->GetReflection()->MutableMessage(message, axes[a].path[i]);
      }
      message->GetReflection()->ClearField(message, axes[a].path.back());
      RETURN_IF_ERROR(
          SetFieldFromText(message, axes[a].path.back(), axes[a].values[choice[a]]));
    }
    // A kernel replaces the custom kernel's source and names (the base keeps its launch
    // shape and mode); ours runs without one.
    for (size_t a = 0; a < axes.size(); ++a) {
      if (!axes[a].path.empty()) continue;
      const v1::CustomKernel& kernel = *axes[a].kernels[choice[a]];
      if (kernel.source().empty()) {
        point.request.clear_custom_kernel();
        continue;
      }
      v1::CustomKernel* point_kernel = point.request.mutable_custom_kernel();
      point_kernel->set_source(kernel.source());
      point_kernel->set_file_name(kernel.file_name());
      point_kernel->set_kernel_name(kernel.kernel_name());
    }
    for (const Axis& axis : axes) {
      point.parameters.emplace_back(axis.name, axis.path.empty()
                                                   ? KernelAxisValue(point.request)
                                                   : FieldValueText(point.request, axis.path));
    }
    points.push_back(std::move(point));
  }
  return points;
}

std::string DescribeParameters(
    const std::vector<std::pair<std::string, std::string>>& parameters) {
  if (parameters.empty()) return "(base)";
  std::vector<std::string> parts;
  for (const auto& [name, value] : parameters) parts.push_back(absl::StrCat(name, "=", value));
  return absl::StrJoin(parts, ", ");
}

}  // namespace gpuprof::sweep
