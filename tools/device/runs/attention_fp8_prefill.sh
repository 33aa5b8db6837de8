#!/usr/bin/env bash
# One GPU (H100 or H200): the fp8 (e4m3) prefill. Its GPU tests beside every prefill test,
# compute-sanitizer over the fp8 ones, the benchmark beside bf16 (ours and cuDNN's), then
# requests through the daemon: fp8 prefill at head_dim 64, 128 and 256, uniform and ragged, the
# same request in bf16, and fp8 requests refused before any GPU work. Here:
#   BUNDLE_GPU_TESTS=0 tools/device/bundle.sh && tar cJf .xfer/carry.tar.xz .carry
#   kernels/attention/bundle_attention_gpu.sh /tmp/attn && tar cJf .xfer/attn.tar.xz -C /tmp attn
# then this script with carry [".xfer"].
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
tar xJf .xfer/attn.tar.xz -C /tmp
A=/tmp/attn S=/tmp/suite
mkdir -p $S
(
  export LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64
  timeout 240 $A/bin/attention_gpu_test --gtest_filter='*Fp8*:*PrefillGpuTest*' >$S/tests.log 2>&1
  echo "tests rc=$?"
  grep -E "^\[check\].*fp8|FAILED|PASSED" $S/tests.log | cut -c1-230
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 $A/bin/attention_gpu_test \
    --gtest_filter='*Fp8*-*long*:*many_tiles*' >$S/memcheck.log 2>&1
  echo "memcheck rc=$?"
  grep -E "ERROR SUMMARY|PASSED|FAILED" $S/memcheck.log | tail -3
  timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 $A/bin/attention_gpu_test \
    --gtest_filter='*Fp8*ragged*' >$S/racecheck.log 2>&1
  echo "racecheck rc=$?"
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" $S/racecheck.log | tail -3
  grep "Race reported" $S/racecheck.log | head -5 | cut -c1-200
  timeout 180 $A/bin/attention_benchmark --fp8-prefill --table=$S/fp8.md >$S/bench.log 2>&1
  echo "bench rc=$?"
  cat $S/fp8.md
)
C='submit attention --gpus 0 --phase prefill --q-len 4096 --kv-len 4096 --causal --dtype fp8-e4m3 --follow
submit attention --gpus 0 --phase prefill --q-len 4096 --kv-len 4096 --causal --follow
submit attention --gpus 0 --phase prefill --q-lens 100,257,512 --kv-lens 1000,257,512 --causal --dtype fp8-e4m3 --follow
submit attention --gpus 0 --phase prefill --q-len 4096 --kv-len 4096 --head-dim 64 --dtype fp8-e4m3 --follow
submit attention --gpus 0 --phase prefill --q-len 4096 --kv-len 4096 --head-dim 256 --num-qo-heads 16 --dtype fp8-e4m3 --follow
submit attention --gpus 0 --phase prefill --q-len 1024 --kv-len 1024 --page-size 8 --dtype fp8-e4m3
submit attention --gpus 0 --phase decode --dtype fp8-e4m3
submit attention --gpus 0 --phase prefill --dtype fp8-e4m3 --backend cudnn
list'
GPU_SUITE_COMMANDS="$C" OUT=$S timeout 300 tools/device/run_gpu_suite.sh >$S/suite.log 2>&1
echo "suite rc=$?" >>$S/suite.log
grep -E "rc=" $S/suite.log
grep -E "^\\$|error|invalid|failed|state|TFLOP|verification|fp8|% of" $S/experiments.txt | cut -c1-260 | head -90
tar czf $OUT/suite.tgz -C $S .
