// Picks the decode kernel for one problem by timing each candidate on the GPU it will run on.
// PlanDecode's cost weights come from one GPU (H100); on another the order of the kernels can
// differ (on an H200 the tensor-core kernel is the fastest at batch 32-64 x 4k, where on the
// H100 it is the slowest), so a caller that will launch the same problem many times - a daemon
// experiment, a serving engine's batch shape - times them once and keeps the fastest.
#ifndef GPUPROF_KERNELS_ATTENTION_DECODE_TUNING_H_
#define GPUPROF_KERNELS_ATTENTION_DECODE_TUNING_H_

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/decode.h"

namespace gpuprof::attention {

struct DecodeTuning {
  struct Candidate {
    DecodeKernelChoice kernel = DecodeKernelChoice::kAuto;
    double median_us = 0;
  };
  DecodeKernelChoice fastest = DecodeKernelChoice::kAuto;
  std::vector<Candidate> candidates;  // every kernel that takes the problem, in trial order

  // "plain 217.2 us, prefetch 216.8 us, tensor_cores 232.0 us: prefetch".
  std::string ToString() const;
};

// Times kPlain, kPrefetch and kTensorCores (where the shape fits it) on `problem` with `options`'
// splits and workspace: `launches` timed launches each after one untimed, by CUDA events on
// `stream`, and returns them with the fastest median. Writes the problem's outputs.
absl::StatusOr<DecodeTuning> TuneDecodeKernel(const AttentionProblem& problem,
                                              const DecodeOptions& options, cudaStream_t stream,
                                              int launches = 5);

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_DECODE_TUNING_H_
