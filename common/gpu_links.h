// How GPUs are linked, as nvidia-smi topo -m names it: "NV18", "PIX", "PHB", "SYS".
#ifndef GPUPROF_COMMON_GPU_LINKS_H_
#define GPUPROF_COMMON_GPU_LINKS_H_

#include <string>

#include "google/protobuf/repeated_field.h"
#include "gpuprof/v1/gpus.pb.h"

namespace gpuprof {

// "X" for self, "NV<count>", "PIX", "PHB", "SYS"; "?" when unknown.
std::string LinkLabel(const v1::GpuLink& link);

// The path between a group's GPUs: one label when every pair has the same ("NV18"), else each
// pair once ("0-1 NV18, 0-2 SYS, 1-2 SYS"); "" without links.
std::string DescribeGpuPath(const google::protobuf::RepeatedPtrField<v1::GpuLink>& links);

}  // namespace gpuprof

#endif  // GPUPROF_COMMON_GPU_LINKS_H_
