#!/usr/bin/env bash
# The daemon/CLI rooms refactor's before/after check on one GPU. Here:
#   tools/device/bundle.sh && tar cf - .carry | xz -T2 -6 > .xfer/carry.tar.xz
#   (at f2d4874, before the refactor) BUNDLE_GPU_TESTS=0 tools/device/bundle.sh, then
#   tar cf - .carry/bin | xz > .xfer/before_bin.tar.xz
# then this script with carry [".xfer"]. It runs the GPU suite of the new tree, then index,
# store and attention (prefill and decode) through the daemon built before the refactor and
# through the new one, twice each, on ONE state directory (the new daemon must open the old
# one's database), and compares each pair of runs with `gpuprof compare` (noise-aware).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
mkdir -p /tmp/before && tar xJf .xfer/before_bin.tar.xz -C /tmp/before
export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
S=/tmp/suite; mkdir -p $S
OUT=$S timeout 300 tools/device/run_gpu_suite.sh > $S/suite.log 2>&1; echo "suite rc=$?" | tee -a $S/suite.log
grep -E "^(PASS|FAIL)" $S/suite.log
state=$(mktemp -d)
runs=(
  "submit index --tokens 65536 --hidden 4096 --gpus 0"
  "submit store --tokens 16384 --pattern random --gpus 0"
  "submit attention --gpus 0 --phase prefill --q-len 4096 --kv-len 4096 --causal"
  "submit attention --gpus 0 --phase decode --batch-size 32 --kv-len 4096"
)
run_daemon() {  # $1: label, $2: bin dir
  "$2/gpuprofd" --state_dir="$state" --listen="unix:$state/sock" \
    --worker_binary="$2/gpuprof_worker" > "$S/gpuprofd_$1.log" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do [ -S "$state/sock" ] && break; sleep 0.2; done
  for r in "${runs[@]}"; do
    timeout 120 "$2/gpuprof" --target "unix:$state/sock" $r --follow > "$S/run_$1.txt" 2>&1
    tail -n 30 "$S/run_$1.txt" | grep -E "exp-[0-9]+|GB/s|TFLOP|state" | head -4 | sed "s/^/$1: /"
  done
  kill -TERM $pid; wait $pid
  rm -f "$state/sock"
}
run_daemon before1 /tmp/before/.carry/bin
run_daemon after1 .carry/bin
run_daemon before2 /tmp/before/.carry/bin
run_daemon after2 .carry/bin
C=".carry/bin/gpuprofd --state_dir=$state --listen=unix:$state/sock --worker_binary=.carry/bin/gpuprof_worker"
$C > $S/gpuprofd_compare.log 2>&1 & pid=$!
for _ in $(seq 100); do [ -S "$state/sock" ] && break; sleep 0.2; done
G=".carry/bin/gpuprof --target unix:$state/sock"
$G list --all 2>&1 | head -20
# Runs 1-4 before, 5-8 after, 9-12 before, 13-16 after: each before run against its after run.
for i in 1 2 3 4 9 10 11 12; do
  a=$(printf "exp-%06d" $i); b=$(printf "exp-%06d" $((i + 4)))
  echo "== compare $a (before) $b (after)"; $G compare $a $b 2>&1 | tail -n 8
done
kill -TERM $pid; wait $pid
tar czf $OUT/suite.tgz -C $S .
