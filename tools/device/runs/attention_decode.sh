#!/usr/bin/env bash
# One GPU: the decode kernels (plain, prefetching, tensor cores) - their GPU tests, memcheck over
# them, and the benchmark's decode shapes with every kernel forced beside the plan's choice.
# Here: kernels/attention/bundle_attention_gpu.sh .xfer/attn, then this script, carry [".xfer"].
set -uo pipefail
cd .xfer/attn
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 120 bin/attention_gpu_test --gtest_filter='*Decode*' > $OUT/decode_test.log 2>&1
echo "decode tests rc=$?"; grep -E "FAILED|PASSED" $OUT/decode_test.log | head
grep -B2 -A8 "Failure" $OUT/decode_test.log | head -30
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 bin/attention_gpu_test \
  --gtest_filter='*Decode*-*long*:*page64*' > $OUT/decode_memcheck.log 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/decode_memcheck.log | tail -2
timeout 200 bin/attention_benchmark --only=decode --table=$OUT/decode.md > $OUT/decode.log 2>&1
echo "decode bench rc=$?"; grep -v "cudnn" $OUT/decode.md | cut -d'|' -f2-11 | cut -c1-120
