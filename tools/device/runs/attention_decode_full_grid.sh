#!/usr/bin/env bash
# One GPU: the decode grid of the kernel-performance issue (GQA groups 1-8 x batch 1/32/64/128/256
# x KV 1k/4k/16k/32k, 8 KV heads, d128, bf16, page 16 shuffled; b256 x 32k skipped for its
# 32 GiB), each shape's tuned kernel and split count as the daemon runs it, then PyTorch's
# flash and cuDNN SDPA backends on the same shapes (the efficient backend, never the best here,
# is left out for time), and compute-sanitizer over the decode tests. Here:
#   flock /tmp/gpuprof_pack.lock sh -c 'kernels/attention/bundle_attention_gpu.sh /tmp/attn &&
#     tar cJf .xfer/attn_decode_grid.tar.xz -C /tmp attn'
# then this script with carry [".xfer/attn_decode_grid.tar.xz"]. STEPS picks the steps (all five
# take more than one 10-minute call on an H200: run "tests grid" and then "torch" with the grid's
# CSV copied to .xfer/ours_full.csv and carried too); RACECHECK_FILTER narrows racecheck, which
# runs each test about 40 s.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
STEPS=${STEPS:-tests grid torch memcheck racecheck}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/bundle && tar xJf .xfer/attn_decode_grid.tar.xz -C /tmp/bundle
B=/tmp/bundle/attn
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
CSV=$OUT/ours_full.csv
for step in $STEPS; do
  case $step in
    tests)
      LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 timeout 100 $B/bin/attention_gpu_test \
        --gtest_filter='*Decode*' > $OUT/decode_test.log 2>&1
      echo "decode tests rc=$?"; grep -E "^\[  (FAILED|PASSED)" $OUT/decode_test.log ;;
    grid)
      LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 timeout 400 $B/bin/attention_benchmark \
        --decode-grid --csv=$CSV > $OUT/grid_full.log 2>&1
      echo "grid rc=$?" ;;
    torch)
      [ -f $CSV ] || CSV=.xfer/ours_full.csv
      PYTHONUNBUFFERED=1 timeout 500 python3 $B/torch_attention_peers.py --decode-grid \
        --backends=flash,cudnn --ours $CSV --table $OUT/torch_full.md > $OUT/torch_full.log 2>&1
      echo "torch rc=$?" ;;
    memcheck)
      LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 timeout 420 $CS --tool memcheck \
        --error-exitcode 3 $B/bin/attention_gpu_test --gtest_filter='*Decode*' \
        > $OUT/memcheck.log 2>&1
      echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^\[  (PASSED|FAILED)" $OUT/memcheck.log ;;
    racecheck)
      LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 timeout 400 $CS --tool racecheck \
        --error-exitcode 3 $B/bin/attention_gpu_test \
        --gtest_filter="${RACECHECK_FILTER:-*d128_gqa8_fp16_page64*:*d128_gqa5_bf16_page16*:*d64_gqa7*}" \
        > $OUT/racecheck.log 2>&1
      echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|^\[  (PASSED|FAILED)" $OUT/racecheck.log ;;
    *) echo "unknown step $step (tests grid torch memcheck racecheck)"; exit 2 ;;
  esac
done
