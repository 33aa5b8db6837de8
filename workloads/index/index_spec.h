// The index workload's spec: embedding gather, out[t] = table[ids[t]]. CUDA-free; the daemon links it.
#ifndef GPUPROF_WORKLOADS_INDEX_INDEX_SPEC_H_
#define GPUPROF_WORKLOADS_INDEX_INDEX_SPEC_H_

#include "workloads/workload_spec.h"

namespace gpuprof::workloads {

extern const WorkloadSpec kIndexSpec;

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_INDEX_INDEX_SPEC_H_
