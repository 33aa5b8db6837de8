#!/usr/bin/env bash
# One paced load run against a fresh gpuprofd: BIN_DIR holds gpuprofd, gpuprof_worker and
# load_generator (e.g. copied from bazel-bin/daemon, bazel-bin/worker, bazel-bin/tests/load);
# BURNERS busy loops of tests/load/cpu_burner.sh and BUILDS compile loops of
# tests/load/background_build.sh compete for the cores meanwhile (0: none).
# The daemon and the generator run at the caller's priority, or at the niceness DAEMON_NICE and
# GENERATOR_NICE give (e.g. -10, as deploy/systemd runs the daemon). Prints the generator's report, the
# daemon's per-phase Submit and commit latencies (tests/load/phase_quantiles.py; a daemon
# without them prints none) and the machine's load average before and after.
# Usage: tests/load/paced_run.sh BIN_DIR [RATE=500] [CLIENTS=200] [SECONDS=20] [BURNERS=0]
#        [BUILDS=0]
set -euo pipefail
bin="$(cd "$1" && pwd)"
rate="${2:-500}"
clients="${3:-200}"
seconds="${4:-20}"
burners="${5:-0}"
builds="${6:-0}"
here="$(cd "$(dirname "$0")" && pwd)"
dir="$(mktemp -d /tmp/paced_run.XXXXXX)"
port=$((19000 + RANDOM % 1000))
${DAEMON_NICE:+nice -n "$DAEMON_NICE"} "$bin/gpuprofd" --state_dir="$dir/state" --listen="unix:$dir/gpuprofd.sock" \
  --metrics_listen="127.0.0.1:$port" --measure_copy_bandwidth=false \
  --worker_binary="$bin/gpuprof_worker" >"$dir/daemon.log" 2>&1 &
daemon=$!
cleanup() {
  kill "$daemon" 2>/dev/null || true
  [[ -n "${burner:-}" ]] && kill "$burner" 2>/dev/null || true
  [[ -n "${build:-}" ]] && kill "$build" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 100); do [[ -S "$dir/gpuprofd.sock" ]] && break; sleep 0.1; done
if [[ "$burners" -gt 0 ]]; then
  "$here/cpu_burner.sh" "$burners" $((seconds + 10)) &
  burner=$!
  sleep 1
fi
if [[ "$builds" -gt 0 ]]; then
  "$here/background_build.sh" "$builds" $((seconds + 10)) &
  build=$!
  sleep 1
fi
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
${GENERATOR_NICE:+nice -n "$GENERATOR_NICE"} "$bin/load_generator" --target="unix:$dir/gpuprofd.sock" --daemon_pid="$daemon" \
  --metrics_port="$port" --clients="$clients" --duration="${seconds}s" --rate="$rate" \
  ${TIMELINE:+--timeline}
curl -s "127.0.0.1:$port/metrics" | "$here/phase_quantiles.py" || true
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
