#!/usr/bin/env bash
# One GPU: the CUPTI scaffolding tags, the attention workload through the daemon, a story.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
cd .carry/bin && rm -f attention_gpu_test collective_gpu_test communicator_fault_gpu_test copy_kernels_gpu_test gpu_probe_gpu_test && cd ../..
S=/tmp/suite; mkdir -p $S
C='submit attention --gpus 0 --follow
submit attention --gpus 0 --phase prefill --batch-size 1 --q-len 4096 --kv-len 4096 --causal --follow
submit attention --gpus 0 --phase prefill --batch-size 1 --q-len 16384 --kv-len 16384 --causal --follow
submit attention --gpus 0 --batch-size 1 --kv-len 32768 --follow
submit attention --gpus 0 --batch-size 128 --kv-len 4096 --follow
submit attention --gpus 0 --batch-size 32 --kv-len 4096 --backend reference --max-iters 20 --follow
submit store --tokens 16384 --pattern random --gpus 0 --l2 cold --trace full --follow
story exp-000007
submit attention --gpus 0 --batch-size 8 --kv-len 32768 --trace full --follow
story exp-000008
list'
GPU_SUITE_COMMANDS="$C" OUT=$S timeout 300 tools/device/run_gpu_suite.sh > $S/suite.log 2>&1
echo "suite rc=$?" >> $S/suite.log
LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64 timeout 90 .carry/bin/tracing_overhead_benchmark > $S/tracing_overhead.log 2>&1
grep -E "^(PASS|FAIL)|rc=" $S/suite.log
tar czf $OUT/suite.tgz -C $S .
grep -E "^\\$|failed|bandwidth:|compute:|verification:|kernel config|scaffold" $S/experiments.txt | cut -c1-400 | head -80
tail -15 $S/tracing_overhead.log
