#!/usr/bin/env bash
# The daemon's all-reduce beside NCCL driven directly, same machine, same call (2 GPUs, fp32).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
cd .carry/bin && ls *_test | xargs rm -f && cd ../..
S=/tmp/suite; mkdir -p $S
C='submit collective --gpus 0,1 --op all-reduce --dtype fp32 --min-bytes 8 --max-bytes 1G --step-factor 8 --follow
submit collective --gpus 0,1 --op all-reduce --dtype fp32 --min-bytes 8 --max-bytes 1G --step-factor 8 --eager --follow'
GPU_SUITE_COMMANDS="$C" OUT=$S timeout 200 tools/device/run_gpu_suite.sh > $S/suite.log 2>&1
LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64 timeout 200 .carry/bin/collective_benchmark --ops=all_reduce --modes=device --dtype=fp32 --min_bytes=8 --max_bytes=1073741824 --step_factor=8 --nonblocking_variant=false > $S/direct.log 2>&1
echo "bench rc=$?"
tar czf $OUT/suite.tgz -C $S .
grep -E "^\\$|collective:|latency:|^ +[0-9.]+ [KMG]?B " $S/experiments.txt | cut -c1-120
cat $S/direct.log | tail -30
