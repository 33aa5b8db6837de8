#!/usr/bin/env bash
# One H100/H200: every attention GPU test (head_dim 256 prefill among them), memcheck over the
# prefill tests, then the whole benchmark (the head_dim 256 prefill and the 4/1-head decode probe
# among its shapes) and PyTorch's backends on the same shapes. Here:
# kernels/attention/bundle_attention_gpu.sh .xfer/attn, then this script with carry [".xfer"].
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd .xfer/attn
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 150 bin/attention_gpu_test > $OUT/gpu_test.log 2>&1
echo "gpu tests rc=$?"
grep -E "^\[check\].*d256|FAILED|PASSED|tests? ran" $OUT/gpu_test.log | cut -c1-260 | head -30
grep -B2 -A8 "Failure" $OUT/gpu_test.log | head -40
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 bin/attention_gpu_test \
  --gtest_filter='*Prefill*d256*:*Decode*d256*' > $OUT/memcheck_d256.log 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck_d256.log | tail -3
OUT=$OUT ./run_attention_gpu.sh . bench 2>&1 | tail -75
