#!/usr/bin/env bash
# attention --tp 2 and index --tp 2 through the daemon on 2 GPUs, with the dispatch test.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
cd .carry/bin && ls *_test | grep -v worker_dispatch_gpu_test | xargs rm -f && cd ../..
S=/tmp/suite; mkdir -p $S
C='submit attention --gpus 0,1 --tp 2 --batch-size 64 --kv-len 4096 --follow
submit attention --gpus 0 --batch-size 64 --kv-len 4096 --num-qo-heads 16 --num-kv-heads 4 --follow
submit attention --gpus 0,1 --tp 2 --phase prefill --batch-size 1 --q-len 8192 --kv-len 8192 --causal --follow
submit index --gpus 0,1 --tp 2 --tokens 4096 --follow
list'
GPU_SUITE_COMMANDS="$C" OUT=$S timeout 300 tools/device/run_gpu_suite.sh > $S/suite.log 2>&1
echo "suite rc=$?" >> $S/suite.log
grep -E "^(PASS|FAIL)|rc=" $S/suite.log
tar czf $OUT/suite.tgz -C $S .
grep -E "^\\$|failed|bandwidth:|compute:|verification:|kernel config" $S/experiments.txt | cut -c1-420 | head -40
