# Sourced by the run scripts that drive sweeps through a real daemon on the GPU machine.
# start_gpuprofd DIR: starts $B/gpuprofd (B: the unpacked bundle's bin/) with its state and
# socket in DIR/state and its log in DIR/gpuprofd.log, waits until it answers, writes `gpuprof
# gpus` to DIR/gpus.txt, and sets `state`, `daemon` (its pid) and `G` (the CLI aimed at it).
start_gpuprofd() {
  local dir=$1
  state=$dir/state; mkdir -p "$state"
  "$B/gpuprofd" --state_dir="$state" --listen="unix:$state/sock" \
    --worker_binary="$B/gpuprof_worker" > "$dir/gpuprofd.log" 2>&1 &
  daemon=$!
  G="$B/gpuprof --target=unix:$state/sock"
  for _ in $(seq 1 300); do $G health >/dev/null 2>&1 && break; sleep 0.2; done
  $G gpus | tee "$dir/gpus.txt"
}
