// A consumer warpgroup's pass over a block's KV tiles, shared by the Hopper prefill kernels
// (bf16/fp16 plain and persistent in prefill_sm90.cu, fp8 in prefill_sm90_fp8.cu): the first
// tile's S = Q K^T alone, then for every tile t its P V issued together with tile t + 1's S, and
// tile t + 1's softmax while the tensor cores compute P V. The consumers take turns to issue
// (ping-pong), so that one's softmax runs under another's multiplies. Include from .cu files
// built for sm_90a.
#ifndef GPUPROF_KERNELS_ATTENTION_PREFILL_SM90_PIPELINE_CUH_
#define GPUPROF_KERNELS_ATTENTION_PREFILL_SM90_PIPELINE_CUH_

#include "kernels/attention/hopper_async.cuh"
#include "kernels/attention/prefill_sm90_softmax.cuh"

namespace gpuprof::attention::sm90 {

// Ping-pong: the consumers take turns to issue their matrix multiplies, in order 0, 1, ...
// (named barrier 1 + c is consumer c's turn; the taker's 128 threads wait there for the 128 of
// the consumer before it), so one's softmax runs while another's multiplies use the tensor
// cores instead of all waiting on them at once. The last consumer lets consumer 0 go first.
// (With two consumers the next turn is written 2 - c, which keeps the head_dim 128 and 256
// kernels as they were: ptxas recomputes it where it is used rather than holding it in a
// register; the modulo form measured 3% slower at head_dim 128 full, in one run.)
template <int kConsumerGroups>
struct ConsumerTurns {
  int mine, theirs;
  __device__ __forceinline__ explicit ConsumerTurns(int consumer)
      : mine(1 + consumer),
        theirs(kConsumerGroups == 2 ? 2 - consumer : 1 + (consumer + 1) % kConsumerGroups) {}
  __device__ __forceinline__ void Take() const {
    asm volatile("bar.sync %0, 256;\n" ::"r"(mine) : "memory");
  }
  __device__ __forceinline__ void Pass() const {
    asm volatile("bar.arrive %0, 256;\n" ::"r"(theirs) : "memory");
  }
};

// What a kernel does at each step of the pass, as callables (each kernel's own barriers, layouts
// and operand types): wait_k(t) / wait_v(t) for tile t's K / V; release_k(t) / release_v(t) once
// its S / P V is done; take_turn() and pass_turn() around issuing; issue_qk(stage) and
// issue_pv(stage) the wgmmas; softmax(t, correction) over S in place; pack_p() turns P into the A
// fragments of P V.
template <class WaitK, class WaitV, class ReleaseK, class ReleaseV, class TakeTurn, class PassTurn,
          class IssueQk, class IssuePv, class Softmax, class PackP>
struct KvTileSteps {
  WaitK wait_k;
  WaitV wait_v;
  ReleaseK release_k;
  ReleaseV release_v;
  TakeTurn take_turn;
  PassTurn pass_turn;
  IssueQk issue_qk;
  IssuePv issue_pv;
  Softmax softmax;
  PackP pack_p;
};

// kReleaseK: K of a stage is released apart from its V (once the tile's S is done). O is left
// with the last P V issued, not waited for. kLastTileApart: the last tile is taken after the
// loop, so that the loop's body has no branch. H200, same call: head_dim 64 +2.0-2.5% full
// (2k-8k) and +0.8% causal; head_dim 128 causal 1.9% slower and head_dim 256 0.2-1.3%, so those
// keep the branch (docs/gpu-runs/attention-prefill-unit-overlap-h200.md).
template <int kStages, bool kReleaseK, bool kLastTileApart = false, int kO, int kS, class Steps>
__device__ __forceinline__ void RunKvTiles(int num_kv_tiles, float (&o)[kO], float (&s)[kS],
                                           const Steps& step) {
  float correction[2];
  step.wait_k(0);
  step.take_turn();
  WgmmaFence();
  step.issue_qk(0);
  WgmmaCommit();
  step.pass_turn();
  WgmmaWait<0>();
  PinRegisters(s);
  if constexpr (kReleaseK) step.release_k(0);
  step.softmax(0, correction);

  // The wait for P V of tile t - 1 opens each tile rather than following the softmax of tile t:
  // ptxas schedules a wgmma wait at the top of its basic block and moves independent arithmetic
  // below it, which put the softmax after the wait and lost the overlap.
  auto open_tile = [&](int t) {
    WgmmaWait<0>();
    PinRegisters(o);
    if (t > 0) step.release_v(t - 1);  // P V of tile t - 1 is done (and its S long since)
    RescaleRows<2 * kO>(o, correction);
    step.pack_p();
    step.wait_v(t);
  };
  // P V of tile t issued with S of tile t + 1, whose softmax runs under it.
  auto overlap_next = [&](int t) {
    step.wait_k(t + 1);
    step.take_turn();
    WgmmaFence();
    step.issue_qk((t + 1) % kStages);
    WgmmaCommit();
    step.issue_pv(t % kStages);
    WgmmaCommit();
    step.pass_turn();
    WgmmaWait<1>();  // S of tile t + 1; P V of tile t may still run
    PinRegisters(s);
    if constexpr (kReleaseK) step.release_k(t + 1);
    step.softmax(t + 1, correction);
  };
  auto last_pv = [&](int t) {
    step.take_turn();
    WgmmaFence();
    step.issue_pv(t % kStages);
    WgmmaCommit();
    step.pass_turn();
  };
  if constexpr (kLastTileApart) {
    for (int t = 0; t + 1 < num_kv_tiles; ++t) {
      open_tile(t);
      overlap_next(t);
    }
    open_tile(num_kv_tiles - 1);
    last_pv(num_kv_tiles - 1);
  } else {
    for (int t = 0; t < num_kv_tiles; ++t) {
      open_tile(t);
      if (t + 1 < num_kv_tiles) {
        overlap_next(t);
      } else {
        last_pv(t);
      }
    }
  }
}

}  // namespace gpuprof::attention::sm90

#endif  // GPUPROF_KERNELS_ATTENTION_PREFILL_SM90_PIPELINE_CUH_
