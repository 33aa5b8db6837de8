// Picks the decode kernel and its split count for one problem by timing the candidates on the
// GPU it will run on. PlanDecode's rules come from one GPU (H100) and one kind of shape; on
// another GPU the order of the kernels can differ (on an H200 the tensor-core kernel is the
// fastest at batch 32-64 x 4k, where on the H100 it is the slowest), and at batch 1 the best
// split count is not the plan's. A caller that will launch the same problem many times - a
// daemon experiment, a serving engine's batch shape - times them once and keeps the fastest.
#ifndef GPUPROF_KERNELS_ATTENTION_DECODE_TUNING_H_
#define GPUPROF_KERNELS_ATTENTION_DECODE_TUNING_H_

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/decode.h"
#include "kernels/attention/decode_plan.h"

namespace gpuprof::attention {

struct DecodeTuning {
  struct Candidate {
    DecodeKernelChoice kernel = DecodeKernelChoice::kAuto;
    int num_splits = 0;    // as launched
    bool halving_splits = false;  // DecodeOptions::halving_splits
    bool planned = false;  // PlanDecode's own split count for this kernel
    double median_us = 0;
  };
  Candidate fastest;
  std::vector<Candidate> candidates;  // in trial order: by kernel, then by split count
  bool l2_flushed = true;             // false: no memory for the flush, timed with a warm L2

  // `options` with the fastest kernel and split count.
  DecodeOptions Apply(DecodeOptions options) const;
  // "plain 1:272.0 2*:217.2; prefetch ...; tensor_cores ... 8:480.2 8h:476.0: tensor_cores x8
  // halving (planned x1)", the plan's split count of each kernel starred, halving splits marked
  // h, times in us.
  std::string ToString() const;
};

// Times kPlain, kPrefetch and each tensor-core kernel that takes the shape (DecodeKernelTakes),
// each at its split candidates that `options`' workspace holds (a tensor-core kernel whose plan
// is one or two splits, its blocks already filling the GPU, also at each count >= 4 halving):
// `launches` timed launches each after one untimed, queued behind a stream blocker (the host's
// launch work off the clock) and each after an L2 flush by a read, by CUDA events on `stream`. Returns them with the fastest median. Writes the
// problem's outputs.
absl::StatusOr<DecodeTuning> TuneDecodeKernel(const AttentionProblem& problem,
                                              const DecodeOptions& options, cudaStream_t stream,
                                              int launches = 5);

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_DECODE_TUNING_H_
