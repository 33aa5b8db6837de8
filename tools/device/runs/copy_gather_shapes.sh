#!/usr/bin/env bash
# The gather's launch choices at the (tokens, hidden) points where the sweeps found ours behind
# PyTorch, with PyTorch's peers in the same run: warps a row (fixed, or -k: each lane k 16-byte
# vectors) x threads a block. Each other benchmark binary in .xfer2/ (*_TAG, built with the kernel's
# loads changed) runs a subset beside it. Needs .xfer/carry.tar.xz and .xfer2/.
# POINTS: "tokens:hidden ..." (hidden of bf16 rows).
set -uo pipefail
tar xJf .xfer/carry.tar.xz
export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
S=/tmp/gather; mkdir -p $S
POINTS=${POINTS:-"512:8192 512:12288 512:16384 4096:1536 4096:2048 4096:8192 4096:16384 16384:1536 16384:2048 16384:4096 65536:1024 65536:1536 65536:2048 64:7168 64:16384"}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $S/device.txt
run() {  # binary tag threads splits
  local binary=$1 tag=$2 threads=$3 splits=$4
  for point in $POINTS; do
    timeout 120 $binary --tune --tune-vocab=128256 --tune-cold=0 --tune-hidden=${point#*:} \
      --tune-tokens=${point%:*} --tune-threads=$threads --tune-splits=$splits \
      --out=$S/$tag.${point/:/_}.jsonl >> $S/$tag.log 2>&1
  done
  cat $S/$tag.*.jsonl > $S/$tag.jsonl
}
run .xfer2/copy_workloads_benchmark ours ${THREADS:-0,128,256,512} ${SPLITS:-0,1,2,4,-1,-2}
for binary in .xfer2/copy_workloads_benchmark_*; do
  tag=${binary##*_}
  run $binary $tag ${VARIANT_THREADS:-0,256} ${VARIANT_SPLITS:-0,-1,-2}
done
# The store kernel loads through the same helper: its default sweep with each binary.
if [ -n "${STORE_TOKENS:-}" ]; then
  for binary in .xfer2/copy_workloads_benchmark*; do
    timeout 150 $binary --tokens=$STORE_TOKENS --out=$S/full.${binary##*/}.jsonl > /dev/null 2>&1
  done
fi
timeout 200 python3 bench/torch_copy_peers.py --ours $S/ours.jsonl --out $S/merged.jsonl \
  --table $S/table.md > $S/peers.log 2>&1; echo "peers rc=$?"
tar czf $OUT/gather.tgz -C $S --exclude='*.[0-9]*_[0-9]*.jsonl' .
grep -c '"verified":true' $S/ours.jsonl $S/plain.jsonl 2>/dev/null
