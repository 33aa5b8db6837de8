// A sweep flag's value as an axis of the SweepRequest: a list, a range or powers of two, in
// the syntax `gpuprof sweep --help` and docs/sweeps.md describe.
#ifndef GPUPROF_CLIENT_SWEEP_AXES_H_
#define GPUPROF_CLIENT_SWEEP_AXES_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"
#include "gpuprof/v1/sweep.pb.h"

namespace gpuprof::client {

// "1,64,4Ki" (a list, any single-valued field; a switch's "true,false" too), "1024:8192:1024"
// (a range, integers), "pow2:1:64Ki" (powers of two, integers); nullopt for a plain value of
// the base request (and for repeated fields, whose list is one value). The axis' field name is
// the caller's to set.
absl::StatusOr<std::optional<v1::SweepAxis>> AxisFromFlag(
    const google::protobuf::FieldDescriptor* field, const std::string& value);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_SWEEP_AXES_H_
