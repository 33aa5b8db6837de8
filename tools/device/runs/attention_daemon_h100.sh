#!/usr/bin/env bash
# One GPU: attention through the daemon, our kernels and the cuDNN backend on the same requests
# (decode and prefill, uniform and ragged), then requests refused before any GPU work. Here:
#   BUNDLE_GPU_TESTS=0 tools/device/bundle.sh && tar cJf .xfer/carry.tar.xz .carry
# then this script with carry [".xfer"].
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
S=/tmp/suite; mkdir -p $S
C='submit attention --gpus 0 --phase decode --batch-size 32 --kv-len 4096 --follow
submit attention --gpus 0 --phase decode --batch-size 32 --kv-len 4096 --backend cudnn --follow
submit attention --gpus 0 --phase decode --batch-size 32 --kv-len 4096 --backend cudnn --seed 7 --follow
submit attention --gpus 0 --phase prefill --q-len 4096 --kv-len 4096 --causal --follow
submit attention --gpus 0 --phase prefill --q-len 4096 --kv-len 4096 --causal --backend cudnn --follow
submit attention --gpus 0 --phase prefill --q-len 4096 --kv-len 4096 --causal --backend cudnn --seed 7 --follow
submit attention --gpus 0 --phase prefill --q-lens 100,257,512 --kv-lens 1000,257,512 --causal --backend cudnn --follow
submit attention --gpus 0 --phase decode --head-dim 264 --backend cudnn
submit attention --gpus 0 --phase decode --num-qo-heads 30 --num-kv-heads 8
list'
GPU_SUITE_COMMANDS="$C" OUT=$S timeout 300 tools/device/run_gpu_suite.sh > $S/suite.log 2>&1
echo "suite rc=$?" >> $S/suite.log
grep -E "rc=" $S/suite.log
grep -E "^\\$|error|invalid|failed|state|TFLOP|bandwidth|verification|config|backend|% of" $S/experiments.txt | cut -c1-260 | head -90
tar czf $OUT/suite.tgz -C $S .
