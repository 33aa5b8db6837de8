// Prefill attention on tensor cores (FlashAttention-2 style; FlashAttention-3 style on H100/H200)
// over the paged KV cache: a ragged batch, causal or not, grouped-query heads, bf16 or fp16 (and
// fp8 e4m3 on Hopper), head_dim 64, 128 or 256. Writes O and, when buffers.lse is set, the
// log-sum-exp of every (row, head).
#ifndef GPUPROF_KERNELS_ATTENTION_PREFILL_H_
#define GPUPROF_KERNELS_ATTENTION_PREFILL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention/attention_params.h"

namespace gpuprof::attention {

// head_dim values the prefill kernel is instantiated for.
const std::vector<int>& PrefillHeadDims();

// The prefill kernels. Three portable ones (mma.sync, sm_80 and newer: see prefill.cu) that split
// the work among warps differently, and one for Hopper (wgmma, sm_90a only: prefill_sm90.cu).
// kAuto's choice among them: ChoosePrefillVariant below (figures in docs/benchmarks/RESULTS.md).
enum class PrefillVariant {
  kAuto,
  kQInRegisters,  // 8 warps x 16 query rows, Q fragments in registers, 64-key tiles
  kTwoRowTiles,   // 4 warps x 32 query rows, Q re-read from shared memory, 32-key tiles
                  // at head_dim 128 (64 at 64)
  kHopperWgmma,   // 2 warpgroups x 64 query rows, wgmma from shared memory, 128-key tiles
                  // (48 at head_dim 256)
  kWideHead,      // head_dim 256 only: 4 warps x 16 query rows, Q re-read from shared memory,
                  // 32-key tiles
  kStaggered,     // as kTwoRowTiles with one K and one V buffer loaded in turn (less shared
                  // memory, more blocks a SM)
};
std::string_view PrefillVariantName(PrefillVariant variant);

// Every variant but kAuto, for tests and benchmarks that run each one.
const std::vector<PrefillVariant>& ConcretePrefillVariants();

// Whether `variant` is instantiated for `head_dim` (kAuto: whether any variant is).
bool PrefillVariantTakesHeadDim(PrefillVariant variant, int head_dim);

// What the choice among prefill variants depends on, for the GPU a launch runs on.
struct PrefillGpu {
  bool sm90 = false;  // compute capability 9.0 (H100, H200): the wgmma kernel runs
  // Resident blocks per SM of kTwoRowTiles and kStaggered at the problem's head_dim and dtype
  // (shared memory and registers decide; 0: not known, e.g. head_dim 256).
  int two_row_tiles_blocks_per_sm = 0;
  int staggered_blocks_per_sm = 0;
};

// The variant a launch runs: `requested` itself, or for kAuto kHopperWgmma on compute
// capability 9.0; elsewhere kWideHead at head_dim 256, and at 64/128 kTwoRowTiles unless
// kStaggered has more blocks resident per SM (an A100's 164 KB hold one two-stage block of
// 96 KB but two staggered ones of 64 KB: on H100 forced to that residency, the staggered kernel
// was 16-20% faster; at equal residency the two-stage one is 12-17% faster). An error naming
// the variant when it cannot run that head_dim or on this GPU.
absl::StatusOr<PrefillVariant> ChoosePrefillVariant(PrefillVariant requested, int head_dim,
                                                    const PrefillGpu& gpu);

// Whether `variant` runs on the current device (kHopperWgmma needs compute capability 9.0).
bool PrefillVariantRunsHere(PrefillVariant variant);

// What a launch used, for results to record.
struct PrefillLaunchInfo {
  int block_m = 0;  // query rows per block (16 per warp)
  int block_n = 0;  // KV rows per shared-memory tile
  int warps = 0;
  int stages = 0;  // K/V tiles in flight (cp.async double buffering)
  int shared_bytes = 0;
  int64_t blocks = 0;
  PrefillVariant variant = PrefillVariant::kAuto;
  bool tma_kv = false;  // K/V tiles loaded by TMA (the Hopper kernel at page sizes of 16k)
  // The blocks resident at once take one head's query tiles, then the next head's (the Hopper
  // kernel at head_dim 256, no causal mask, K and V of all KV heads beyond half the L2).
  bool tiles_first = false;
  // Tiles of a short last wave run as clusters of two blocks, each over half the keys, by a
  // second launch (the Hopper kernel at head_dim 64, no causal mask, a uniform batch).
  int split_tiles = 0;
  // Clusters of two blocks (neighbouring query tiles of a head) load K and V for each other by
  // TMA multicast (the Hopper kernel at head_dim 256, no causal mask, an even number of query
  // tiles).
  bool multicast_kv = false;
  // One block an SM loops over the (query head, query tile, sequence) units, each unit's Q and
  // first K/V tiles loading under the previous unit's work (the Hopper kernel at head_dim 64
  // and 128 up to 16384 keys, no causal mask, a uniform batch).
  bool persistent = false;
  // Of those units, how many (the last two rounds' worth, where they do not fill whole rounds)
  // had their KV tiles dealt out evenly to the blocks, a unit cut between two at most, the
  // partial results handed over through the workspace (stream-K; 0: none).
  int stream_k_units = 0;

  std::string ToString() const;
};

// Scratch for the Hopper kernel's persistent grid at head_dim 64: where its units leave a short
// last round, the last two rounds' units are dealt out by KV tiles, and a block whose range ends
// inside a unit hands its partial result to the next through this. Zero it once when
// it is allocated: every launch leaves it zeroed again. Without it (or smaller than
// PrefillWorkspaceBytes) those rounds run whole units. One launch at a time may use it.
struct PrefillWorkspace {
  void* data = nullptr;
  size_t bytes = 0;
};
// Bytes of the workspace for `head_dim` (0 where no kernel uses one).
size_t PrefillWorkspaceBytes(int head_dim);
// Where in it the hand-over's ready flags start (up to the end): every launch must leave them
// zero, which the GPU tests check.
size_t PrefillWorkspaceFlagsOffset(int head_dim);

// Validates `problem` (buffers.o is in OutputDtype(shape.dtype): the inputs' type, bf16 for fp8
// e4m3) and launches on `stream`. fp8 e4m3 runs in the Hopper kernel only (prefill_sm90_fp8.cu).
absl::StatusOr<PrefillLaunchInfo> LaunchPrefill(const AttentionProblem& problem,
                                                cudaStream_t stream,
                                                PrefillVariant variant = PrefillVariant::kAuto,
                                                const PrefillWorkspace& workspace = {});

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_PREFILL_H_
