#!/usr/bin/env bash
# One H100/H200: the Hopper (wgmma) prefill kernel. Here: kernels/attention/bundle_attention_gpu.sh
# .xfer/attn, then this script with carry [".xfer"]. Steps (each optional, in order):
#   check  - the prefill GPU tests (every variant against the fp32 reference) and memcheck on them
#   quick  - the benchmark's 4k causal prefill
#   prefill - the benchmark's prefill shapes (4k-16k causal, 4k full)
#   full   - the whole benchmark and PyTorch's backends on the same shapes
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
steps=${*:-check quick}
cd .xfer/attn
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
if [[ " $steps " == *" check "* ]]; then
  timeout 120 bin/attention_gpu_test --gtest_filter='*Prefill*' > $OUT/prefill_test.log 2>&1
  echo "prefill tests rc=$?"
  grep -E "^\[check\].*hopper|^\[skip\]|FAILED|PASSED" $OUT/prefill_test.log | cut -c1-300 | head -30
  grep -B2 -A8 "Failure" $OUT/prefill_test.log | head -40
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 bin/attention_gpu_test \
    --gtest_filter='*Prefill*-*long*:*page64*' > $OUT/prefill_memcheck.log 2>&1
  echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/prefill_memcheck.log | tail -3
fi
if [[ " $steps " == *" quick "* ]]; then
  timeout 120 bin/attention_benchmark --quick --only=prefill --table=$OUT/quick.md > $OUT/quick.log 2>&1
  echo "quick bench rc=$?"; cat $OUT/quick.md
fi
if [[ " $steps " == *" prefill "* ]]; then
  timeout 200 bin/attention_benchmark --only=prefill --table=$OUT/prefill.md > $OUT/prefill.log 2>&1
  echo "prefill bench rc=$?"; cat $OUT/prefill.md
fi
if [[ " $steps " == *" full "* ]]; then
  OUT=$OUT ./run_attention_gpu.sh . bench 2>&1 | tail -60
fi
