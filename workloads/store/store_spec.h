// The store workload's spec: KV-cache scatter, k_cache[slots[t]] = k[t] (and V). CUDA-free; the daemon links it.
#ifndef GPUPROF_WORKLOADS_STORE_STORE_SPEC_H_
#define GPUPROF_WORKLOADS_STORE_STORE_SPEC_H_

#include "workloads/workload_spec.h"

namespace gpuprof::workloads {

extern const WorkloadSpec kStoreSpec;

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_STORE_STORE_SPEC_H_
