// A sweep's axes -> its points: each point is the base ExperimentRequest with one value per
// axis set. Pure: no I/O. Errors (InvalidArgument) name the axis and the value.
#ifndef GPUPROF_SWEEP_SWEEP_EXPANSION_H_
#define GPUPROF_SWEEP_SWEEP_EXPANSION_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/sweep.pb.h"

namespace gpuprof::sweep {

// A sweep may not expand to more points than this.
inline constexpr int kMaxSweepPoints = 10000;

// The axis over kernels (SweepAxis.kernels): each point one source, or ours.
inline constexpr absl::string_view kKernelAxis = "kernel";
inline constexpr absl::string_view kOurKernel = "ours";

// Fields from ExperimentRequest down to the one an axis sets.
using FieldPath = std::vector<const google::protobuf::FieldDescriptor*>;

struct ExpandedPoint {
  // (axis field, value as canonical text), in axis order.
  std::vector<std::pair<std::string, std::string>> parameters;
  v1::ExperimentRequest request;
};

// Resolves an axis' field name against a request for `workload_field`'s workload: a spec
// field ("num_tokens"), the spec field qualified by the workload ("index.num_tokens"), or a
// dotted path from ExperimentRequest ("measurement.l2_mode", "tp_degree").
absl::StatusOr<FieldPath> ResolveAxisField(const v1::ExperimentRequest& base,
                                           absl::string_view name);

// The value at `path` in `request` as canonical text: integers in decimal, enums by short
// name ("bf16"), booleans "true"/"false", durations "500ms", messages as "START:END"-style
// text, repeated fields comma-joined, maps "k=v" sorted. Used for point parameters and for
// matching points by their parameters.
std::string FieldValueText(const v1::ExperimentRequest& request, const FieldPath& path);

// The kernel axis' value of a request: its custom kernel's file name ("kernel.cu" when it has
// none), or "ours" when it has no custom kernel.
std::string KernelAxisValue(const v1::ExperimentRequest& request);

// The axis' values as typed (lists as given; ranges and powers of two enumerated).
absl::StatusOr<std::vector<std::string>> AxisValues(const v1::SweepAxis& axis,
                                                    const FieldPath& path);

// Every point of the sweep, in expansion order (cartesian: the last axis varies fastest).
absl::StatusOr<std::vector<ExpandedPoint>> ExpandSweep(const v1::SweepRequest& request);

// "num_tokens=4096, dtype=bf16"; "(base)" for a sweep without axes.
std::string DescribeParameters(const std::vector<std::pair<std::string, std::string>>& parameters);

}  // namespace gpuprof::sweep

#endif  // GPUPROF_SWEEP_SWEEP_EXPANSION_H_
