#!/usr/bin/env bash
# The final GPU check on one GPU after the merges: every gpu-tagged test (the multi-rank ones
# skip themselves on one GPU), the daemon end to end (index, store, attention, a sweep with
# --follow, compare of two sweeps), then the GPU sweep test.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
S=/tmp/suite; mkdir -p $S
C='submit index --gpus 0 --tokens 16384 --hidden 4096 --follow
submit store --gpus 0 --tokens 4096 --follow
submit attention --gpus 0 --batch-size 8 --kv-len 2048 --follow
sweep index --tokens 64,4Ki --hidden 2048,4096 --gpu-count 1 --max-iters 100 --follow --format markdown
sweep index --tokens 64,4Ki --hidden 2048,4096 --gpu-count 1 --max-iters 100 --follow --format markdown
compare swp-000001 swp-000002
whoami
quota
list'
GPU_SUITE_COMMANDS="$C" OUT=$S timeout 480 tools/device/run_gpu_suite.sh > $S/suite.log 2>&1
echo "suite rc=$?" >> $S/suite.log
grep -E "^(PASS|FAIL)|rc=" $S/suite.log
grep -E "^\\$|failed|bandwidth:|verification:|geomean|worse|better|user|^\\|" $S/experiments.txt | cut -c1-200 | head -60
tar czf $OUT/suite.tgz -C $S .
