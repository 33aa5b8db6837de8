#!/usr/bin/env bash
# One GPU: the execution story (kernels, hardware metrics, warp stalls) of the attention
# requests whose targets are missed - decode 32 x 4k (the tuned kernel), the 4k causal prefill
# at head_dim 128 and 256 (the Hopper kernel on H100/H200) - through the daemon. Here:
#   BUNDLE_GPU_TESTS=0 tools/device/bundle.sh && tar cJf .xfer/carry.tar.xz .carry
# then this script with carry [".xfer"].
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
tar xJf .xfer/carry.tar.xz
S=/tmp/suite; mkdir -p $S
C='submit attention --gpus 0 --phase decode --batch-size 32 --kv-len 4096 --trace full --follow
submit attention --gpus 0 --phase prefill --q-len 4096 --kv-len 4096 --causal --trace full --follow
submit attention --gpus 0 --phase prefill --q-len 4096 --kv-len 4096 --causal --head-dim 256 --num-qo-heads 16 --num-kv-heads 8 --trace full --follow
story exp-000001
story exp-000002
story exp-000003'
GPU_SUITE_COMMANDS="$C" OUT=$S timeout 400 tools/device/run_gpu_suite.sh > $S/suite.log 2>&1
echo "suite rc=$?"
grep -E "^\\$|kernel config|decode_tuning|stall|DRAM|SM |occupancy|tensor|pipe|%" $S/experiments.txt | cut -c1-220 | head -120
tar czf $OUT/suite.tgz -C $S .
