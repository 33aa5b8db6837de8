#!/usr/bin/env bash
# The layout refactor's before/after check on one GPU: the GPU suite, then the copy benchmark
# built before the refactor (at 94bf935, copied to .carry/before/) and after it, alternately
# twice. Run from the repository root with the bundle in .carry (tools/device/bundle.sh).
set -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
S=/tmp/suite; mkdir -p $S
GPU_SUITE_COMMANDS=$'submit index --tokens 65536 --hidden 4096 --gpus 0 --follow\nsubmit store --tokens 16384 --pattern random --gpus 0 --trace full --follow\nsubmit index --tokens 64 --graph 20 --gpus 0 --follow\nsubmit radix --requests 20000 --follow\nlist' OUT=$S timeout 330 tools/device/run_gpu_suite.sh > $S/suite.log 2>&1; echo "suite rc=$?" | tee -a $S/suite.log
grep -E "PASS|FAIL" $S/suite.log
cd $S
for round in 1 2; do
 timeout 100 $OLDPWD/.carry/before/copy_kernels_benchmark --quick --out=$S/before$round.jsonl > $S/before$round.log 2>&1; echo "before$round rc=$?"
 timeout 100 $OLDPWD/.carry/bin/copy_workloads_benchmark --quick --out=$S/after$round.jsonl > $S/after$round.log 2>&1; echo "after$round rc=$?"
done
cd $OLDPWD
tar czf $OUT/suite.tgz -C $S .
python3 - <<'PY'
import json,glob
for f in sorted(glob.glob('/tmp/suite/*.jsonl')):
    for l in open(f):
        d=json.loads(l)
        print(f.split('/')[-1], d.get('kind'), d.get('tokens'), d.get('hidden', d.get('row_bytes')), d.get('dtype'), d.get('mode'), d.get('l2'), 'gbps=%s'%d.get('gbps'), 'pct_copy=%s'%d.get('pct_copy'), 'copy=%s'%d.get('copy_gbps'), d.get('verified'), d.get('error',''))
PY
