#!/usr/bin/env bash
# Runs the index/store benchmark and its PyTorch peers on this machine's GPU 0 and prints one
# table (ours, torch, ratios, % of measured copy bandwidth). From a bundle made by
# tools/device/bundle.sh (.carry/bin/copy_workloads_benchmark) or a bazel-bin tree.
#   bench/run_copy_benchmarks.sh [--quick]    (logs under ${OUT:-/tmp/gpuprof-bench})
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/gpuprof-bench}
mkdir -p "$out"
binary=.carry/bin/copy_workloads_benchmark
[ -x "$binary" ] || binary=bazel-bin/bench/copy_workloads_benchmark
export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
status=0
"$binary" --out="$out/ours.jsonl" "$@" 2>"$out/ours.log" || status=$?
PYTHONUNBUFFERED=1 python3 bench/torch_copy_peers.py --ours "$out/ours.jsonl" \
  --out "$out/merged.jsonl" --table "$out/table.md"
exit $status
