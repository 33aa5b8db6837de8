#!/usr/bin/env bash
# Runs on a GPU machine from a bundle made by tools/device/bundle.sh: every gpu-tagged test,
# then the daemon end to end (probe, `gpuprof gpus`), then the benchmarks if asked
# (RUN_BENCHMARKS=1). Writes logs to ${OUT:-/tmp/gpuprof-gpu-suite}. GPU_SUITE_COMMANDS: gpuprof
# command lines (one per line) run against the daemon; GPUPROF_DAEMON_FLAGS: extra gpuprofd
# flags (e.g. --enable_test_faults for the fault commands).
set -uo pipefail
cd "$(dirname "$0")/../.."
bundle=$PWD/.carry
out=${OUT:-/tmp/gpuprof-gpu-suite}
mkdir -p "$out"
export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TEST_SRCDIR=$bundle/runfiles TEST_WORKSPACE=. TEST_TMPDIR=$(mktemp -d)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
status=0
# Tests that start the real daemon find the binaries where Bazel's runfiles would hold them.
for binary in daemon/gpuprofd worker/gpuprof_worker client/gpuprof; do
  mkdir -p "$bundle/runfiles/$(dirname $binary)"
  ln -sf "$bundle/bin/$(basename $binary)" "$bundle/runfiles/$binary"
done

{
  echo "== host"; nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total --format=csv
  nvidia-smi topo -m
} 2>&1 | tee "$out/host.txt"

for test in "$bundle"/bin/*_test; do
  [ -x "$test" ] || continue
  name=$(basename "$test")
  if "$test" >"$out/$name.log" 2>&1; then
    echo "PASS $name"
  else
    echo "FAIL $name"; tail -30 "$out/$name.log"; status=1
  fi
done

# The daemon end to end on this machine: it probes the GPUs through a worker.
state=$(mktemp -d)
"$bundle/bin/gpuprofd" --state_dir="$state" --listen="unix:$state/sock" \
  --worker_binary="$bundle/bin/gpuprof_worker" ${GPUPROF_DAEMON_FLAGS:-} >"$out/gpuprofd.log" 2>&1 &
daemon=$!
for _ in $(seq 1 600); do
  "$bundle/bin/gpuprof" --target="unix:$state/sock" health >/dev/null 2>&1 && break
  sleep 0.2
done
"$bundle/bin/gpuprof" --target="unix:$state/sock" gpus 2>&1 | tee "$out/gpus.txt"
"$bundle/bin/gpuprof" --target="unix:$state/sock" gpus --json >"$out/gpus.json" 2>&1
if [ -n "${GPU_SUITE_COMMANDS:-}" ]; then
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    echo "\$ gpuprof $line" | tee -a "$out/experiments.txt"
    eval "\"$bundle/bin/gpuprof\" --target=unix:$state/sock $line" 2>&1 | tee -a "$out/experiments.txt"
  done <<<"$GPU_SUITE_COMMANDS"
fi
kill -TERM $daemon; wait $daemon
if [ "${RUN_BENCHMARKS:-0}" = 1 ]; then
  for bench in "$bundle"/bin/*_benchmark; do
    [ -x "$bench" ] && "$bench" 2>&1 | tee "$out/$(basename "$bench").log"
  done
fi
exit $status
