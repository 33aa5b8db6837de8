#!/usr/bin/env bash
# Collectives eager and in graphs, small to large, with the path between the ranks (2 GPUs).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
cd .carry/bin && ls *_test | xargs rm -f && cd ../..
S=/tmp/suite; mkdir -p $S
C='submit collective --gpus 0,1 --op all-reduce --min-bytes 8 --max-bytes 64M --step-factor 8 --follow
submit collective --gpus 0,1 --op all-reduce --min-bytes 8 --max-bytes 64M --step-factor 8 --eager --follow
submit collective --gpus 0,1 --op all-gather --min-bytes 1K --max-bytes 256M --step-factor 16 --buffer-mode registered --follow'
GPU_SUITE_COMMANDS="$C" OUT=$S timeout 240 tools/device/run_gpu_suite.sh > $S/suite.log 2>&1
echo "suite rc=$?" >> $S/suite.log
tar czf $OUT/suite.tgz -C $S .
grep -E "^\\$|failed|collective:|latency:|verification:|^ +[0-9.]+ [KMG]?B " $S/experiments.txt | cut -c1-200 | head -60
