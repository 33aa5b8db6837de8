// cuDNN's fused attention (cuDNN 9, backend graph API) over the same paged KV cache, ragged
// batch and grouped-query heads as gpuprof's own kernels: a vendor backend beside ours, run on
// the same inputs and checked against the same fp32 reference.
//
// cuDNN is loaded at run time (libcudnn.so.9), so machines without it build and run everything
// else; the backend then says why it cannot run. The graph is the one cuDNN's fused flash
// engines recognise: Q.K^T (K and V read through the page table by paged-cache-load
// operations, or in place when every sequence's pages are consecutive), scale, a padding mask
// from the per-sequence lengths, the bottom-right causal mask, softmax (optionally with its
// log-sum-exp), P.V. When cuDNN has no engine for a shape, Create() returns an error that
// carries cuDNN's own reason.
#ifndef GPUPROF_KERNELS_ATTENTION_CUDNN_ATTENTION_H_
#define GPUPROF_KERNELS_ATTENTION_CUDNN_ATTENTION_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/paged_layout.h"

namespace gpuprof::attention {

// What a plan is, for results to record.
struct CudnnAttentionInfo {
  int64_t cudnn_version = 0;     // e.g. 91400 for 9.14.0
  int64_t engine_index = -1;     // cuDNN's global engine index of the chosen plan
  int chosen_rank = 0;           // its 1-based place in the heuristic's ranked list
  int engine_configs_tried = 0;  // the heuristic's candidates tried
  int64_t workspace_bytes = 0;
  double build_ms = 0;  // graph, heuristics, plans and timing them, on the host
  bool writes_lse = false;
  bool reads_kv_in_place = false;  // pages in order: K and V read without the page table
  // Every plan cuDNN built (for each graph tried: pages in order are also read in place), in
  // the heuristic's order, with its time per launch when timed (-1: not timed, or it failed).
  struct TimedPlan {
    int64_t engine_index = -1;
    int rank = 0;
    float time_ms = -1;
    bool kv_in_place = false;
  };
  std::vector<TimedPlan> timed_plans;

  std::string ToString() const;
};

class CudnnAttention {
 public:
  // Builds the graph and an execution plan for `problem` on the current device (when cuDNN's
  // heuristic offers several plans, or the pages are in order and K and V can also be read in
  // place, the fastest on these buffers; o and lse are written while timing): its shape and
  // host lengths, `layout`'s page tables (uploaded here as the padded [batch, max_pages] table
  // cuDNN reads), and the device buffers of problem.buffers, which Run() reads and writes.
  // The LSE is written when problem.buffers.lse is set.
  static absl::StatusOr<std::unique_ptr<CudnnAttention>> Create(const AttentionProblem& problem,
                                                                const PagedLayout& layout);

  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Launches the plan on `stream`.
  absl::Status Run(cudaStream_t stream) const;

  const CudnnAttentionInfo& info() const { return info_; }

  struct State;  // cuDNN objects and the device index arrays; defined in the .cc

 private:
  CudnnAttention(std::unique_ptr<State> state, CudnnAttentionInfo info);

  std::unique_ptr<State> state_;
  CudnnAttentionInfo info_;
};

// The loaded cuDNN's version (e.g. 91400), or why it could not be loaded.
absl::StatusOr<int64_t> CudnnVersion();

// Builds the graph Create() would build and has cuDNN finalize it, on the host: cuDNN checks
// every tensor and operation without a GPU. Engines and plans need the GPU; this does not.
// kv_in_place: the graph that reads K and V without the page table (pages in order).
absl::Status CheckCudnnAttentionGraph(const AttentionShape& shape, const SequenceLengths& lengths,
                                      int64_t cache_pages, bool with_lse, bool kv_in_place = false);

// The index arrays cuDNN reads beside ours: element offsets of each sequence's first row in
// Q/O ([batch + 1], rows * heads * head_dim) and in the LSE ([batch + 1], rows * heads), and
// the page table padded to [batch, max_pages] (unused entries 0); when every sequence's pages
// are consecutive and the sequences in page order, the element offsets of each sequence's first
// KV row in the caches ([batch + 1]; empty otherwise).
struct CudnnIndexArrays {
  std::vector<int32_t> q_offsets;
  std::vector<int32_t> lse_offsets;
  std::vector<int32_t> page_table;
  std::vector<int32_t> kv_offsets;
  int64_t max_pages = 0;
};
absl::StatusOr<CudnnIndexArrays> BuildCudnnIndexArrays(const AttentionShape& shape,
                                                       const SequenceLengths& lengths,
                                                       const PagedLayout& layout);

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_CUDNN_ATTENTION_H_
