#!/usr/bin/env bash
# Re-runs the one store point a sweep flagged (1 token, 16 x 128 bf16, graph mode) many times,
# with the on-GPU check and with the host check, after a large point as in the sweep; then the
# per-point cost and compute-sanitizer's initcheck.
set -uo pipefail
tar xJf .xfer/carry.tar.xz
B=$PWD/.carry/bin; export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
S=/tmp/recheck; mkdir -p $S; state=$(mktemp -d)
$B/gpuprofd --state_dir=$state --listen=unix:$state/sock --worker_binary=$B/gpuprof_worker > $S/gpuprofd.log 2>&1 &
daemon=$!
for _ in $(seq 1 300); do $B/gpuprof --target=unix:$state/sock health >/dev/null 2>&1 && break; sleep 0.2; done
G="$B/gpuprof --target=unix:$state/sock"
M="--graph 20 --warmup 5 --min-iters 10 --max-iters 200 --time-budget 300ms --trace off --gpus 0"
check() { $G submit store --tokens $1 --kv-heads $2 --head-dim $3 $M $4 --follow 2>&1 | grep -E "verification|FAILED|differ" | head -2 | tr '\n' ' '; echo; }
for i in 1 2 3 4 5 6; do
  echo "after big: $(check 65536 8 256 '') | t=1 16x128 gpu: $(check 1 16 128 '') | host: $(check 1 16 128 --host-inputs)"
done
for layout in "1 256" "8 128" "32 128"; do echo "t=1 $layout: $(check 1 $layout '')"; done
kill -TERM $daemon; wait $daemon
bash tools/device/runs/point_cost_h100.sh 2>&1 | grep -E "PASS|FAIL|wall_ms" | tr '\n' ';'
SANITIZER_TESTS="copy_kernels_gpu_test device_inputs_gpu_test" bash tools/device/runs/compute_sanitizer_h100.sh 2>&1 | grep -E "initcheck|memcheck"
mkdir -p $OUT; tar czf $OUT/recheck.tgz -C $S .
