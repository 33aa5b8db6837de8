// The "execution story" of an experiment: what happened on the GPU, in order, with the
// hardware's view of each kernel (process over metrics). A tree of phases with their start
// offsets and durations; in each, the kernels (runs of the same kernel collapsed: "x 200,
// median 4.1 us, total 0.82 ms"), copies, memsets and CPU waits; for each kernel its launch
// configuration, hardware metrics, warp stalls and a one-line classification against the
// GPU's roofline. Pure and CUPTI-free: the client renders it from stored records.
#ifndef GPUPROF_REPORT_EXECUTION_STORY_H_
#define GPUPROF_REPORT_EXECUTION_STORY_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/gpus.pb.h"

namespace gpuprof::report {

enum class Boundedness { kUnknown, kMemory, kCompute, kLatency };

struct KernelClassification {
  Boundedness bound = Boundedness::kUnknown;
  // One line: "memory-bound: DRAM 91% of peak, SM 22%".
  std::string explanation;
};

// What the classification looks at for one kernel.
struct KernelEvidence {
  double median_us = 0;
  // Profiler metrics by name (see metric_names.h); may be empty.
  absl::flat_hash_map<std::string, double> metrics;
  // Per launch, from the workload's own accounting; 0 when unknown.
  double bytes_per_launch = 0;
  double flops_per_launch = 0;
};

// Where the kernel sits against the roofline of `gpu`:
// - with DRAM and SM throughput metrics: latency-bound when both are below 40% (or below 60%
//   for a kernel shorter than 3 us), else memory- or compute-bound by the higher one;
// - with bytes (and FLOPs) per launch and the GPU's spec peaks: the side of the ridge point
//   its arithmetic intensity falls on, latency-bound when it reaches under 40% of that roof;
// - else latency-bound when shorter than 3 us; otherwise unknown, saying what is missing.
KernelClassification ClassifyKernel(const KernelEvidence& evidence, const gpuprof::v1::GpuInfo& gpu);

// "IndexKernel<2, 1, 128>" for "void gpuprof::kernels::jit::IndexKernel<2, 1, 128>(Params)":
// no return type, namespaces or parameter list.
std::string ShortKernelName(absl::string_view name);

// The story as text. `result` gives the GPUs (provenance), bytes/FLOPs per launch of the
// timed kernel, dropped records and what was not collected.
std::string RenderExecutionStory(absl::string_view experiment_id,
                                 const std::vector<gpuprof::v1::ActivityRecord>& records,
                                 const gpuprof::v1::ExperimentResult& result);

}  // namespace gpuprof::report

#endif  // GPUPROF_REPORT_EXECUTION_STORY_H_
