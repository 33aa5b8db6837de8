#!/usr/bin/env bash
# One GPU: the cuDNN attention backend's first run. Here: kernels/attention/bundle_attention_gpu.sh
# .xfer/attn, then this script with carry [".xfer"]. It runs the cuDNN GPU tests with cuDNN's
# own log (why an engine was refused), then the benchmark (ours and cuDNN side by side) and
# PyTorch's backends on the same shapes.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd .xfer/attn
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64
ls /usr/lib/x86_64-linux-gnu | grep -E "libcudnn(_graph)?\.so\.9" | head -3
CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=$OUT/cudnn.log timeout 120 bin/attention_gpu_test \
  --gtest_filter='*Cudnn*' > $OUT/cudnn_test.log 2>&1
echo "cudnn tests rc=$?"
grep -E "^\[check\]|^\[cudnn\]|FAILED|PASSED|cuDNN" $OUT/cudnn_test.log | cut -c1-400 | head -30
grep "Reason" $OUT/cudnn.log | sort | uniq -c | sort -rn | head -15
OUT=$OUT ./run_attention_gpu.sh . tests bench 2>&1 | tail -70
