#!/usr/bin/env bash
# Sets up a Debian 12 machine, builds gpuprof, starts gpuprofd in the background and runs a
# first experiment, printing its result. The daemon keeps running afterwards (stop it with
# `kill $(cat <state_dir>/gpuprofd.pid)`).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
bazel build //daemon:gpuprofd //worker:gpuprof_worker //client:gpuprof

state_dir=${GPUPROF_STATE_DIR:-$HOME/.local/state/gpuprof}
target="unix:$state_dir/gpuprofd.sock"
mkdir -p "$state_dir"
gpuprof=bazel-bin/client/gpuprof
if ! "$gpuprof" --target="$target" health >/dev/null 2>&1; then
  nohup bazel-bin/daemon/gpuprofd --state_dir="$state_dir" \
    --listen="127.0.0.1:7070,$target" >"$state_dir/gpuprofd.log" 2>&1 &
  echo $! >"$state_dir/gpuprofd.pid"
  echo "started gpuprofd (pid $(cat "$state_dir/gpuprofd.pid"), log $state_dir/gpuprofd.log)"
  # The daemon answers once a worker has probed the GPUs (and measured their copy bandwidth).
  for _ in $(seq 1 600); do
    "$gpuprof" --target="$target" health >/dev/null 2>&1 && break
    kill -0 "$(cat "$state_dir/gpuprofd.pid")" 2>/dev/null ||
      { cat "$state_dir/gpuprofd.log"; exit 1; }
    sleep 0.2
  done
fi

"$gpuprof" --target="$target" gpus
echo
echo "\$ gpuprof submit radix --follow"
"$gpuprof" --target="$target" submit radix --follow
# On a GPU machine whose worker has the index kernel, a first GPU experiment too.
if "$gpuprof" --target="$target" gpus --json | grep -q '"uuid"' &&
   "$gpuprof" --target="$target" gpus | grep -q "workloads:.*index"; then
  echo
  echo "\$ gpuprof submit index --tokens 65536 --hidden 4096 --dtype bf16 --gpus 0 --follow"
  "$gpuprof" --target="$target" submit index --tokens 65536 --hidden 4096 --dtype bf16 --gpus 0 --follow
fi
echo
echo "gpuprofd keeps running: export GPUPROF_TARGET=$target and use bazel-bin/client/gpuprof"
