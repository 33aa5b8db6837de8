#!/usr/bin/env bash
# On 2 GPUs: a sweep spread over both, the sweep throughput on 1 and 2 GPUs, the GPU sweep test,
# and the collective's wrapper mode (staged through a symmetric window vs direct) beside the
# plain, registered and symmetric modes, over the same sizes.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
B=$PWD/.carry/bin; export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
export TEST_SRCDIR=$PWD/.carry/runfiles TEST_WORKSPACE=. TEST_TMPDIR=$(mktemp -d)
S=/tmp/x2; mkdir -p $S; state=$S/state; mkdir -p $state
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $S/host.txt
timeout 200 $B/sweep_gpu_e2e_test > $S/sweep_gpu_e2e_test.log 2>&1 && echo "PASS sweep_gpu_e2e_test" || { echo "FAIL sweep_gpu_e2e_test"; tail -30 $S/sweep_gpu_e2e_test.log; }
$B/gpuprofd --state_dir=$state --listen=unix:$state/sock --worker_binary=$B/gpuprof_worker \
  > $S/gpuprofd.log 2>&1 &
daemon=$!
for _ in $(seq 1 300); do $B/gpuprof --target=unix:$state/sock health >/dev/null 2>&1 && break; sleep 0.2; done
G="$B/gpuprof --target=unix:$state/sock"
# One sweep over both GPUs: 48 index points, each on whichever GPU is free.
start=$(date +%s%N)
$G sweep index --tokens 1,64,512,4Ki,16Ki,64Ki --hidden 2048,4096,5120,8192 --dtype bf16,fp16 \
  --gpu-count 1 --graph 20 --max-iters 200 --time-budget 300ms --trace off --follow --format markdown \
  > $S/sweep_2gpus.md 2> $S/sweep_2gpus.err
echo "48-point sweep over 2 GPUs: rc=$? $(( ($(date +%s%N) - start) / 1000000 )) ms" | tee -a $S/summary.txt
grep -c "| 0 \|| 1 " $S/sweep_2gpus.md >/dev/null; head -8 $S/sweep_2gpus.md
for n in 1 2; do
  timeout 120 $B/sweep_throughput_benchmark --target=unix:$state/sock --workload=index --gpu_count=$n \
    > $S/throughput_$n.txt 2>&1; echo "== throughput gpu_count=$n"; tail -12 $S/throughput_$n.txt
done
for mode in device symmetric wrapper; do
  for launch in graph $( [ $mode = wrapper ] && echo eager ); do
    extra=""; [ $launch = eager ] && extra="--eager"
    $G submit collective --gpus 0,1 --tp 2 --op all-reduce --buffer-mode $mode --min-bytes 8 \
      --max-bytes 256M --step-factor 4 $extra --follow --json > $S/ar_${mode}_$launch.json 2>&1
    echo "all-reduce $mode $launch rc=$?"
  done
done
python3 - $S <<'PY'
import json, sys, glob, os
rows = {}
for path in sorted(glob.glob(sys.argv[1] + '/ar_*.json')):
    name = os.path.basename(path)[3:-5]
    for line in open(path):
        if '"result"' in line:
            c = json.loads(line)['result'].get('collective', {})
            rows[name] = c
for name, c in rows.items():
    print(name, 'correct=%s' % c.get('correct'), 'threshold=%s' % c.get('wrapperThresholdBytes', '-'),
          'busbw@max=%.1f' % c.get('busbwGbps', 0), 'latency_us=%.2f' % c.get('smallMessageLatencyUs', 0))
names = list(rows)
sizes = [int(p['bytes']) for p in rows[names[0]].get('points', [])] if names else []
print('bytes ' + ' '.join(names))
for i, b in enumerate(sizes):
    cells = []
    for n in names:
        p = rows[n]['points'][i]
        cell = '%.2f' % p['time']['medianUs']
        if 'stagedMedianUs' in p: cell += '(s%.2f/d%.2f%s)' % (p['stagedMedianUs'], p['directMedianUs'], '*' if p.get('staged') else '')
        cells.append(cell)
    print(b, ' '.join(cells))
PY
kill -TERM $daemon; wait $daemon
tar czf $OUT/x2.tgz -C $S --exclude=sock .
