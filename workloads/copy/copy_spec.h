// The copy workload's spec: copy bandwidth within a GPU, between host and GPU (pinned or
// pageable) and between GPUs, the reference every "% of copy" figure is read against.
// CUDA-free; the daemon links it.
#ifndef GPUPROF_WORKLOADS_COPY_COPY_SPEC_H_
#define GPUPROF_WORKLOADS_COPY_COPY_SPEC_H_

#include "workloads/workload_spec.h"

namespace gpuprof::workloads {

extern const WorkloadSpec kCopySpec;

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_COPY_COPY_SPEC_H_
