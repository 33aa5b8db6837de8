// `gpuprof submit <workload> [flags]` -> ExperimentRequest. The workload's flags come from its
// spec message's descriptor (IndexSpec, StoreSpec, ...), so a field added to the proto is a flag
// with no client change. Pure: no I/O, no RPCs.
#ifndef GPUPROF_CLIENT_REQUEST_BUILDER_H_
#define GPUPROF_CLIENT_REQUEST_BUILDER_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/command_line.h"
#include "google/protobuf/descriptor.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::client {

// What `submit` accepts: the field names of ExperimentRequest's `workload` oneof, in order.
std::vector<std::string> WorkloadNames();

// The workloads that run a kernel of the submitter's own (ExperimentRequest.custom_kernel):
// index, store, attention (decode).
bool TakesCustomKernel(absl::string_view workload);
// "kernel-file", "kernel-name", ...: what custom_kernel_flags() holds for such a workload.
std::vector<std::string> CustomKernelFlagNames();
// Names a file the CLI reads into custom_kernel.source; no field of its own.
inline constexpr absl::string_view kKernelFileFlag = "kernel-file";

class ExperimentRequestBuilder {
 public:
  // InvalidArgument, listing the workloads, when `workload` is not one.
  static absl::StatusOr<ExperimentRequestBuilder> ForWorkload(absl::string_view workload);

  const std::string& workload() const { return workload_field_->name(); }
  const google::protobuf::Descriptor* spec_type() const { return workload_field_->message_type(); }

  // Flags generated from the spec's fields (with the alias table applied).
  const std::vector<FlagSpec>& workload_flags() const { return workload_flags_; }
  // Flags every workload shares: GPU selection, measurement, tracing, labels, ...
  const std::vector<FlagSpec>& common_flags() const { return common_flags_; }
  // --kernel-file and the custom_kernel fields' flags, for workloads that TakesCustomKernel;
  // empty for the others.
  const std::vector<FlagSpec>& custom_kernel_flags() const { return custom_kernel_flags_; }
  // Spec fields no flag can set (e.g. a repeated message), for help.
  const std::vector<std::string>& unsettable_fields() const { return unsettable_fields_; }

  // The field a flag sets (the last of its path), or nullptr for flags that are not request
  // flags; and its API name for sweep axes: the spec field's name ("num_tokens") or the dotted
  // path from ExperimentRequest ("measurement.l2_mode").
  const google::protobuf::FieldDescriptor* FieldForFlag(absl::string_view flag_name) const;
  // Every field from ExperimentRequest down to the one the flag sets; empty for other flags.
  std::vector<const google::protobuf::FieldDescriptor*> FieldPathForFlag(
      absl::string_view flag_name) const;
  std::string ApiFieldName(absl::string_view flag_name) const;

  // The request the flags describe; the workload is selected even with no workload flags.
  // Flags that are not request flags (--follow, --json) are ignored. Errors (InvalidArgument)
  // name the flag as typed and say what is allowed. Only syntax is checked: ranges are the
  // daemon's job. `user` is left empty unless --user is given.
  absl::StatusOr<v1::ExperimentRequest> Build(const ParsedArgs& args) const;

 private:
  // Fields from ExperimentRequest down to the one a flag sets.
  using FieldPath = std::vector<const google::protobuf::FieldDescriptor*>;

  explicit ExperimentRequestBuilder(const google::protobuf::FieldDescriptor* workload_field)
      : workload_field_(workload_field) {}

  const google::protobuf::FieldDescriptor* workload_field_;
  std::vector<FlagSpec> workload_flags_;
  std::vector<FlagSpec> common_flags_;
  std::vector<FlagSpec> custom_kernel_flags_;
  std::vector<std::string> unsettable_fields_;
  absl::flat_hash_map<std::string, FieldPath> path_by_flag_;
};

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_REQUEST_BUILDER_H_
