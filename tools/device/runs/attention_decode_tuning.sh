#!/usr/bin/env bash
# One GPU: decode kernel tuning. The decode GPU tests (each kernel forced, then the tuned pick,
# against the fp32 reference), the benchmark's decode shapes (the tuned pick beside the plan's
# and each kernel forced), and decode requests through the daemon (the result's decode_tuning
# line). Here: the two bundles of attention_release_check.sh, then this script with carry [".xfer"].
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/bundle && tar xJf .xfer/attn.tar.xz -C /tmp/bundle
B=/tmp/bundle/attn
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
timeout 200 $B/bin/attention_gpu_test --gtest_filter='*Decode*' > $OUT/decode_test.log 2>&1
echo "decode tests rc=$?"; grep -E "FAILED|PASSED" $OUT/decode_test.log
grep -E "^\[check\].*tuned" $OUT/decode_test.log | cut -c1-200
grep -B2 -A8 "Failure" $OUT/decode_test.log | head -30
timeout 240 $B/bin/attention_benchmark --only=decode --table=$OUT/decode.md > $OUT/decode.log 2>&1
echo "decode bench rc=$?"
grep -E "^\| decode (split|tuned) \|" $OUT/decode.md | cut -d'|' -f2-5,11,12 | cut -c1-200
unset LD_LIBRARY_PATH
tar xJf .xfer/carry.tar.xz
S=/tmp/suite; mkdir -p $S
C='submit attention --gpus 0 --phase decode --batch-size 32 --kv-len 4096 --follow
submit attention --gpus 0 --phase decode --batch-size 128 --kv-len 4096 --follow
submit attention --gpus 0 --phase decode --batch-size 1 --kv-len 16384 --follow'
GPU_SUITE_COMMANDS="$C" OUT=$S timeout 200 tools/device/run_gpu_suite.sh > $S/suite.log 2>&1
echo "daemon suite rc=$?"
grep -E "^\\$|error|failed|bandwidth|verification:|launch|decode_tuning" $S/experiments.txt | cut -c1-220
tar czf $OUT/suite.tgz -C $S .
