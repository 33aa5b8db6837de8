#!/usr/bin/env bash
# The index kernel's launch choices (threads per block, warps per row) at the hidden sizes of
# released models and >= 4Ki tokens, with the automatic choice and PyTorch's peers in the same
# run, to retune ChooseCopyKernelConfig where ours trails. The vocabulary is the daemon's
# default (128256), as in the sweeps. Needs .xfer/carry.tar.xz and the benchmark in .xfer2/.
set -uo pipefail
tar xJf .xfer/carry.tar.xz
export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
S=/tmp/tune; mkdir -p $S
HIDDEN=${TUNE_HIDDEN:-1024,1536,2048,2304,2560,3072,4096,5120,6144,8192,12288,16384}
timeout 420 .xfer2/copy_workloads_benchmark --tune --tune-vocab=128256 --tune-cold=0 \
  --tune-hidden=$HIDDEN --tune-tokens=${TUNE_TOKENS:-4096,16384,65536} \
  --tune-threads=0,128,256,512 --tune-splits=0,1,2,4 --out=$S/ours.jsonl > $S/ours.log 2>&1
echo "benchmark rc=$?"; tail -2 $S/ours.log
timeout 150 python3 bench/torch_copy_peers.py --ours $S/ours.jsonl --out $S/merged.jsonl \
  --table $S/table.md > $S/peers.log 2>&1; echo "peers rc=$?"
cp $S/* $OUT/
