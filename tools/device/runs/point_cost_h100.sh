#!/usr/bin/env bash
# What one small point costs on a warm worker, end to end (CLI submit to result), with inputs
# made on the GPU (the default) and on the host (--host-inputs), and where the time goes
# (phase by phase, from the events' timestamps). Then the GPU checks of the input kernels.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
B=$PWD/.carry/bin; export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
S=/tmp/pointcost; mkdir -p $S; state=$(mktemp -d)
export TEST_SRCDIR=$PWD/.carry/runfiles TEST_WORKSPACE=. TEST_TMPDIR=$(mktemp -d)
for t in device_inputs_gpu_test copy_kernels_gpu_test; do
  $B/$t > $S/$t.log 2>&1 && echo "PASS $t" || { echo "FAIL $t"; tail -20 $S/$t.log; }
done
$B/gpuprofd --state_dir=$state --listen=unix:$state/sock --worker_binary=$B/gpuprof_worker \
  > $S/gpuprofd.log 2>&1 &
for _ in $(seq 1 300); do $B/gpuprof --target=unix:$state/sock health >/dev/null 2>&1 && break; sleep 0.2; done
run() {  # label, then gpuprof submit arguments
  local label=$1; shift
  local t0=$(date +%s%N)
  $B/gpuprof --target=unix:$state/sock submit "$@" --follow --json > $S/$label.json 2>&1
  local rc=$?
  local t1=$(date +%s%N)
  echo "$label rc=$rc wall_ms=$(( (t1 - t0) / 1000000 ))" | tee -a $S/walls.txt
}
# First point starts the worker; the rest reuse it.
run warmup index --gpus 0 --tokens 64
for i in 1 2 3 4 5; do run index64_gpu_$i index --gpus 0 --tokens 64; done
for i in 1 2 3; do run index64_host_$i index --gpus 0 --tokens 64 --host-inputs; done
for i in 1 2 3; do run store64_gpu_$i store --gpus 0 --tokens 64; done
for i in 1 2 3; do run store64_host_$i store --gpus 0 --tokens 64 --host-inputs; done
for i in 1 2; do run index64_fast_$i index --gpus 0 --tokens 64 --warmup 3 --min-iters 5 --noise 0.05 --trace off; done
run index16k_gpu index --gpus 0 --tokens 16384
run index16k_host index --gpus 0 --tokens 16384 --host-inputs
run store16k_gpu store --gpus 0 --tokens 16384
run store16k_host store --gpus 0 --tokens 16384 --host-inputs
python3 - "$S" <<'PY'
import json, sys, glob, os, datetime
def ts(t): return datetime.datetime.fromisoformat(t.replace('Z','+00:00')).timestamp()
for path in sorted(glob.glob(sys.argv[1] + '/*.json')):
    events = []
    for line in open(path):
        line = line.strip()
        if line.startswith('{'):
            try: events.append(json.loads(line))
            except Exception: pass
    if not events: continue
    t0 = ts(events[0]['time']); spans = {}; last = t0; phase = 'queued'
    for e in events:
        t = ts(e['time'])
        spans[phase] = spans.get(phase, 0) + (t - last); last = t
        if 'progress' in e: phase = e['progress'].get('phase', '?').replace('PHASE_', '').lower()
        elif 'state' in e: phase = e['state'].get('state', '?').lower()
    res = [e['result'] for e in events if 'result' in e]
    v = res[0].get('verification', {}).get('passed') if res else None
    k = res[0].get('measurement', {}).get('kernelTime', {}).get('medianUs') if res else None
    print(os.path.basename(path)[:-5], 'total_ms=%.0f' % (1000 * (last - t0)), 'verified=%s' % v,
          'kernel_median_us=%s' % k,
          ' '.join('%s=%.0f' % (p, 1000 * d) for p, d in spans.items() if d > 0.0005))
PY
kill -TERM %1; wait
tar czf $OUT/pointcost.tgz -C $S .
