#!/usr/bin/env bash
# The headline of every workload and phase on one GPU, as `list`, `get`, a sweep table, a plot
# and the metrics show it; the stopping rules' floor (samples and measured time behind each
# figure); two identical sweeps compared (no point may be flagged); the gpu-tagged tests of
# measure/ and the copy, index and attention runners.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
S=/tmp/suite; mkdir -p $S
C='submit index --gpus 0 --tokens 16384 --hidden 4096 --follow
submit store --gpus 0 --tokens 16384 --follow
submit attention --gpus 0 --phase decode --batch-size 32 --kv-len 4096 --follow
submit attention --gpus 0 --phase prefill --batch-size 1 --kv-len 4096 --causal --follow
submit collective --gpus 0 --follow
submit radix --follow
list
get exp-000001
get exp-000003
get exp-000004
get exp-000005
get exp-000006
sweep attention --phase decode --batch-size 8,32 --kv-len 2048,8192 --gpu-count 1 --follow
sweep plot swp-000001 --y pct-of-copy -o /tmp/suite/decode_pct_of_copy.svg
sweep get swp-000001 --format csv
sweep radix --requests 500,2000 --follow
sweep radix --requests 500,2000 --follow
compare swp-000002 swp-000003 --fail-on-regression 3
sweep index --tokens 4Ki,16Ki --hidden 4096 --gpu-count 1 --follow
sweep index --tokens 4Ki,16Ki --hidden 4096 --gpu-count 1 --follow
compare swp-000004 swp-000005 --fail-on-regression 3
compare swp-000004 swp-000005 --json
whoami >/dev/null; curl -s http://127.0.0.1:9464/metrics | grep -E "^gpuprof_result"'
GPU_SUITE_COMMANDS="$C" OUT=$S GPUPROF_DAEMON_FLAGS="--metrics_listen=127.0.0.1:9464" \
  timeout 540 tools/device/run_gpu_suite.sh > $S/suite.log 2>&1
echo "suite rc=$?" >> $S/suite.log
grep -E "^(PASS|FAIL)|rc=" $S/suite.log
cut -c1-220 $S/experiments.txt | grep -vE "^\s*$" | head -150
tar czf $OUT/suite.tgz -C $S .
