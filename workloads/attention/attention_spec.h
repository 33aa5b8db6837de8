// The attention workload's spec: prefill and decode attention over a paged KV cache. CUDA-free; the daemon links it.
#ifndef GPUPROF_WORKLOADS_ATTENTION_ATTENTION_SPEC_H_
#define GPUPROF_WORKLOADS_ATTENTION_ATTENTION_SPEC_H_

#include "workloads/workload_spec.h"

namespace gpuprof::workloads {

extern const WorkloadSpec kAttentionSpec;

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_ATTENTION_ATTENTION_SPEC_H_
