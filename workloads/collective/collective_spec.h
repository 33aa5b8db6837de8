// The collective workload's spec: NCCL collectives across the leased GPUs. CUDA-free; the daemon links it.
#ifndef GPUPROF_WORKLOADS_COLLECTIVE_COLLECTIVE_SPEC_H_
#define GPUPROF_WORKLOADS_COLLECTIVE_COLLECTIVE_SPEC_H_

#include "workloads/workload_spec.h"

namespace gpuprof::workloads {

extern const WorkloadSpec kCollectiveSpec;

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_COLLECTIVE_COLLECTIVE_SPEC_H_
