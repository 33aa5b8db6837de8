#!/usr/bin/env bash
# One GPU: our Hopper prefill and PyTorch's cuDNN SDPA backend at the same shapes, timed in
# alternating rounds (ours, PyTorch, ours, ...) with the same number of flushed samples, so that
# both meet the GPU in the same power and clock state. Long kernels (16k tokens: 7 ms a launch)
# run tens of launches back to back, and the clock the GPU holds drifts over a run by more than
# the difference being measured. Prints each round, then ours / cuDNN per shape and round.
# Bundle: kernels/attention/bundle_attention_gpu.sh /tmp/attn, packed as .xfer2/attn.tar.xz;
# carry [".xfer2"]. SHAPES (attention_benchmark --prefill-shapes), ROUNDS (3), BENCHES (builds of
# the benchmark to alternate too, as NAME=PATH ...; default ours=the bundle's).
set -uo pipefail
[ -d /tmp/attn ] || tar xJf .xfer2/attn.tar.xz -C /tmp
A=/tmp/attn; export LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64
SHAPES=${SHAPES:-4096:full:128,8192:full:128,16384:full:128,4096:full:256}
LOG=/tmp/prefill_interleaved.txt
BENCHES=${BENCHES:-ours=$A/bin/attention_benchmark}
for round in $(seq 1 "${ROUNDS:-3}"); do
  for bench in $BENCHES; do
    # The benchmark's row names a shape as "b1 q=kv=4096 full d64 32/8"; printed as 4096:full:64.
    "${bench#*=}" --quick --only=prefill --prefill-shapes="$SHAPES" 2>&1 |
      awk -v r="$round" -v who="${bench%%=*}" -F'|' '/hopper_wgmma/ {
        n = split($3, w, " "); dim = 128
        for (i = 4; i <= n; ++i) if (w[i] ~ /^d[0-9]+$/) dim = substr(w[i], 2)
        sub(/q=kv=/, "", w[2]); printf "round %s %s %s:%s:%s %.1f\n", r, who, w[2], w[3], dim, $5}'
  done
  (cd $A && python3 - "$SHAPES" "$round" <<'PY'
import sys
import torch
from torch.nn.attention import SDPBackend
import torch_attention_peers as peers
dev = torch.device("cuda")
flush = peers.make_flush("read", dev)
for shape in sys.argv[1].split(","):
    length, mask, dim = shape.split(":")
    length, dim = int(length), int(dim)
    heads = 16 if dim == 256 else 32
    q = torch.empty(1, heads, length, dim, dtype=torch.bfloat16, device=dev).uniform_(-2, 2)
    k = torch.empty(1, 8, length, dim, dtype=torch.bfloat16, device=dev).uniform_(-1, 1)
    v = torch.empty_like(k).uniform_(-1, 1)
    ms, how = peers.run_case(SDPBackend.CUDNN_ATTENTION, q, k, v, mask == "causal", flush, 10)
    print(f"round {sys.argv[2]} cudnn {shape} {ms * 1e3:.1f} {how}")
PY
  )
done | tee $LOG
# Per shape and build: ours / cuDNN in each round (cuDNN us / ours us; > 1: ours faster).
python3 - $LOG <<'PY'
import collections, statistics, sys
times = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    _, rnd, who, shape, us = line.split()[:5]
    times[shape][(who, rnd)] = float(us)
print("| shape (len:mask:head_dim) | build | ours us, each round | cuDNN us, each round | ours / cuDNN, each round | median |")
print("|---|---|---|---|---|---|")
for shape, t in times.items():
    rounds = sorted({r for _, r in t})
    cudnn = [t.get(("cudnn", r)) for r in rounds]
    for who in sorted({w for w, _ in t if w != "cudnn"}):
        ours = [t.get((who, r)) for r in rounds]
        ratios = [c / o for o, c in zip(ours, cudnn) if o and c]
        fmt = lambda xs: ", ".join(f"{x:.1f}" for x in xs if x)
        print(f"| {shape} | {who} | {fmt(ours)} | {fmt(cudnn)} | "
              f"{', '.join(f'{x:.3f}' for x in ratios)} | {statistics.median(ratios):.3f}x |"
              if ratios else f"| {shape} | {who} | missing |")
PY
