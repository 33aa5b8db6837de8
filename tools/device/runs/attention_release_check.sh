#!/usr/bin/env bash
# One H100/H200: the attention workload end to end. Requests through the daemon (head_dim 128
# and 256, prefill and decode, our kernels and cuDNN, one refused before any GPU work), then
# every attention GPU test, memcheck over them, the benchmark and PyTorch's backends on the same
# shapes. Here:
#   BUNDLE_GPU_TESTS=0 tools/device/bundle.sh && tar cJf .xfer/carry.tar.xz .carry
#   kernels/attention/bundle_attention_gpu.sh /tmp/attn && tar cJf .xfer/attn.tar.xz -C /tmp attn
# then this script with carry [".xfer"]. Without .xfer/carry.tar.xz the daemon step is skipped.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
if [ -f .xfer/carry.tar.xz ]; then
  tar xJf .xfer/carry.tar.xz
  S=/tmp/suite; mkdir -p $S
  C='submit attention --gpus 0 --phase prefill --q-len 4096 --kv-len 4096 --causal --follow
submit attention --gpus 0 --phase prefill --q-len 4096 --kv-len 4096 --causal --head-dim 256 --num-qo-heads 16 --num-kv-heads 8 --follow
submit attention --gpus 0 --phase prefill --q-len 4096 --kv-len 4096 --causal --head-dim 256 --num-qo-heads 16 --num-kv-heads 8 --backend cudnn --follow
submit attention --gpus 0 --phase prefill --q-lens 100,257,512 --kv-lens 1000,257,512 --causal --head-dim 256 --num-qo-heads 16 --num-kv-heads 8 --follow
submit attention --gpus 0 --phase decode --batch-size 32 --kv-len 4096 --head-dim 256 --num-qo-heads 16 --num-kv-heads 8 --follow
submit attention --gpus 0 --phase prefill --head-dim 96
list'
  GPU_SUITE_COMMANDS="$C" OUT=$S timeout 240 tools/device/run_gpu_suite.sh > $S/suite.log 2>&1
  echo "daemon suite rc=$?"
  grep -E "^\\$|error|invalid|failed|state|TFLOP|bandwidth|verification|config|backend|% of|jit" \
    $S/experiments.txt | cut -c1-240 | head -70
  tar czf $OUT/suite.tgz -C $S .
fi
mkdir -p /tmp/bundle && tar xJf .xfer/attn.tar.xz -C /tmp/bundle
OUT=$OUT /tmp/bundle/attn/run_attention_gpu.sh /tmp/bundle/attn tests sanitize bench 2>&1 |
  grep -v "^\[check\]" | tail -120
