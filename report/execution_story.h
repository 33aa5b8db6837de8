// The "execution story" of an experiment: what happened on the GPU, in order, with the
// hardware's view of each kernel (process over metrics). A tree of phases with their start
// offsets and durations; in each (under one node per GPU when there are several), the kernels
// (runs of the same kernel collapsed: "x 200, median 4.1 us, total 0.82 ms"), copies, memsets
// and CPU waits; for each kernel its launch configuration, hardware metrics, warp stalls and a
// one-line classification against the GPU's roofline. Then the workload's kernels of a sample
// with their shares when there are several, and one line per GPU. Pure and CUPTI-free: the
// client renders it from stored records.
//
// Built in three steps: story_timeline (records -> phases and groups), story_analysis (what
// they mean), and the text here.
#ifndef GPUPROF_REPORT_EXECUTION_STORY_H_
#define GPUPROF_REPORT_EXECUTION_STORY_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "gpuprof/v1/experiment.pb.h"
#include "report/story_analysis.h"
#include "report/story_timeline.h"

namespace gpuprof::report {

// "IndexKernel<2, 1, 128>" for "void gpuprof::kernels::jit::IndexKernel<2, 1, 128>(Params)":
// no return type, namespaces or parameter list.
std::string ShortKernelName(absl::string_view name);

// The story as text. `result` gives the GPUs (provenance), bytes/FLOPs per unit of work,
// dropped records and what was not collected.
std::string RenderExecutionStory(absl::string_view experiment_id,
                                 const std::vector<gpuprof::v1::ActivityRecord>& records,
                                 const gpuprof::v1::ExperimentResult& result);

// The same from a timeline and its analysis (what the records-taking overload does).
std::string RenderExecutionStory(absl::string_view experiment_id, const StoryTimeline& timeline,
                                 const StoryAnalysis& analysis,
                                 const gpuprof::v1::ExperimentResult& result);

}  // namespace gpuprof::report

#endif  // GPUPROF_REPORT_EXECUTION_STORY_H_
