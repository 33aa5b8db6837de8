// Paged decode attention (flash-decoding): one query token per sequence, or up to
// kMaxDecodeQLen draft tokens for speculative decoding, against a paged KV cache. One block
// reads one KV head once for every query head of its group, over one split of the KV length;
// when the batch is too small to fill the GPU the KV length is split across blocks and a
// second kernel merges the splits by their log-sum-exp.
#ifndef GPUPROF_KERNELS_ATTENTION_DECODE_H_
#define GPUPROF_KERNELS_ATTENTION_DECODE_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/decode_plan.h"

namespace gpuprof::attention {

// head_dim values the decode kernel is instantiated for.
const std::vector<int>& DecodeHeadDims();

// Which decode kernel runs: the plan's choice, or one forced (tests, comparisons).
// kTensorCores: the query rows of a KV head as one mma tile (decode_mma.h); head_dim 64 or 128
// with group_size x q_len <= 16, head_dim 256 with <= 8. kTensorCoresLongTiles: the same at
// head_dim 64 with <= 8 rows, 32 keys a warp's tile instead of 16 (fewer stages, more blocks).
// kTensorCoresTma: kTensorCores with K and V loaded by TMA (sm_90, pages of a multiple of 16
// rows); kTensorCoresLongTilesTma: kTensorCoresLongTiles loaded so.
enum class DecodeKernelChoice {
  kAuto,
  kPlain,
  kPrefetch,
  kTensorCores,
  kTensorCoresLongTiles,
  kTensorCoresTma,
  kTensorCoresLongTilesTma
};
std::string_view DecodeKernelChoiceName(DecodeKernelChoice kernel);
// Whether `kernel` is one of the four tensor-core kernels; whether, forced, it takes a problem
// of this head_dim, page size and rows a KV head (group_size x the longest q_len) on a GPU of
// this compute capability (LaunchDecode refuses it otherwise; kAuto and the CUDA-core kernels
// take every problem).
bool IsTensorCoreDecode(DecodeKernelChoice kernel);
bool DecodeKernelTakes(DecodeKernelChoice kernel, int head_dim, int page_size, int rows,
                       int compute_major);

struct DecodeOptions {
  // 0: the heuristic of PlanDecode (fill every SM's resident blocks); 1: unsplit; n: n splits.
  int num_splits = 0;
  // fp32 partial outputs and LSEs of the splits; DecodeWorkspaceBytes says how much a given
  // split count needs. With a chosen split count the heuristic takes no more splits than fit.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  DecodeKernelChoice kernel = DecodeKernelChoice::kAuto;
  // On sm_90+, launch the merge as a programmatic dependent of the split kernel, so that its
  // launch and ramp overlap the split kernel's tail; false launches it after (to compare).
  bool overlap_merge = true;
  // The tensor-core kernels' splits by halves (HalvingSplitBegin in decode_plan.h: the first
  // split half the keys, the next a quarter, ...; the large ones launched first) instead of even;
  // with more than one split only. The CUDA-core kernels refuse it.
  bool halving_splits = false;
};

// Workspace for `num_splits` splits (0 when num_splits <= 1).
size_t DecodeWorkspaceBytes(const AttentionShape& shape, const SequenceLengths& lengths,
                            int num_splits);

struct DecodeLaunchInfo {
  DecodePlan plan;
  int threads = 0;        // per block
  int blocks_per_sm = 0;  // occupancy the heuristic used
  bool merged = false;    // a merge kernel ran after the split kernel
  bool merge_overlapped = false;  // ... launched as its programmatic dependent (sm_90+)

  std::string ToString() const;
};

// Validates `problem` (q_len <= kMaxDecodeQLen for every sequence) and launches the decode
// kernel, plus the merge kernel when more than one split is used.
absl::StatusOr<DecodeLaunchInfo> LaunchDecode(const AttentionProblem& problem,
                                              const DecodeOptions& options, cudaStream_t stream);

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_DECODE_H_
