#!/usr/bin/env bash
# One call on 2 GPUs: the GPU suite (minus the tests already run on a GPU this session) and the
# daemon end to end with collectives across ranks, faults, attention and the CLI.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
rm -f .carry/bin/attention_gpu_test .carry/bin/collective_gpu_test .carry/bin/communicator_fault_gpu_test
S=/tmp/suite; mkdir -p $S
C='submit collective --gpus 0,1 --op all-reduce --min-bytes 8 --max-bytes 1G --step-factor 4 --follow
submit collective --gpus 0,1 --op all-reduce --min-bytes 8 --max-bytes 1G --step-factor 4 --follow
submit collective --gpus 0,1 --op all-gather --min-bytes 1K --max-bytes 1G --step-factor 16 --buffer-mode symmetric --follow
submit collective --gpus 0,1 --op reduce-scatter --min-bytes 1K --max-bytes 256M --step-factor 16 --buffer-mode registered --in-place --follow
submit collective --gpus 0,1 --op all-to-all --bytes-per-rank 64M --dtype fp8-e4m3 --follow
submit collective --gpus 0,1 --op broadcast --root 1 --bytes-per-rank 256M --follow
submit collective --gpus 0,1 --timeout 20s --label gpuprof.fault=hang@1 --follow
submit collective --gpus 0,1 --label gpuprof.fault=crash@0 --follow
gpus
submit collective --gpus 0,1 --bytes-per-rank 8 --follow
submit attention --gpus 0 --follow
submit attention --gpus 1 --phase prefill --batch-size 1 --q-len 4096 --kv-len 4096 --causal --follow
submit attention --gpus 0 --batch-size 1 --kv-len 32768 --follow
submit attention --gpus 0 --batch-size 64 --kv-len 4096 --trace full --follow
submit index --gpus 0 --tp 2 --follow
story exp-000014
story exp-000001
list'
GPU_SUITE_COMMANDS="$C" GPUPROF_DAEMON_FLAGS=--enable_test_faults OUT=$S timeout 420 tools/device/run_gpu_suite.sh > $S/suite.log 2>&1
echo "suite rc=$?" >> $S/suite.log
grep -E "^(PASS|FAIL)|rc=" $S/suite.log
tar czf $OUT/suite.tgz -C $S .
grep -E "^\\$|state:|reason|collective:|latency:|bandwidth:|compute:|verification:|error|exact|WRONG|^ +[0-9.]+ [KMG]?B " $S/experiments.txt | head -150
