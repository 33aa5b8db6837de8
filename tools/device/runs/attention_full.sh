#!/usr/bin/env bash
# One H100 or H200: every attention GPU test, then the benchmark (our kernels, the cuDNN
# backend) and PyTorch's backends on the same shapes, in one call. Here:
# kernels/attention/bundle_attention_gpu.sh .xfer/attn, then this script with carry [".xfer"].
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd .xfer/attn
OUT=$OUT ./run_attention_gpu.sh . tests bench 2>&1 | grep -v "^\[check\]" | tail -90
