#!/usr/bin/env bash
# One GPU: decode over GQA groups 1-8 x batch x KV length (8 KV heads, d128, bf16, page 16),
# our tuned kernel beside the measured copy and PyTorch's SDPA backends in the same call, after
# the decode GPU tests (every kernel and the tuned pick against the fp32 reference). Here:
#   flock /tmp/gpuprof_pack.lock sh -c 'kernels/attention/bundle_attention_gpu.sh /tmp/attn &&
#     tar cJf .xfer/attn_decode_grid.tar.xz -C /tmp attn'
# then this script with carry [".xfer"]. GRID_ARGS narrows the grid (attention_benchmark's
# --groups/--batches/--kv-lens/--max-kv-gib); bin/attention_benchmark_base, when the bundle has
# one (the kernels before a change), runs BASE_GRID_ARGS first for a before/after in one call.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/bundle && tar xJf .xfer/attn_decode_grid.tar.xz -C /tmp/bundle
B=/tmp/bundle/attn
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout 120 $B/bin/attention_gpu_test --gtest_filter='*Decode*' > $OUT/decode_test.log 2>&1
  echo "decode tests rc=$?"; grep -E "^\[  (FAILED|PASSED)|tests? ran" $OUT/decode_test.log
  grep -B2 -A8 "Failure" $OUT/decode_test.log | head -30
fi
if [ -x $B/bin/attention_benchmark_base ]; then
  timeout 90 $B/bin/attention_benchmark_base --decode-grid ${BASE_GRID_ARGS:-} \
    --csv=$OUT/base.csv > $OUT/base_grid.log 2>&1
  echo "base grid rc=$?"; grep -E "^\|" $OUT/base_grid.log | cut -d'|' -f2-8
fi
timeout ${GRID_TIMEOUT:-120} $B/bin/attention_benchmark --decode-grid ${GRID_ARGS:-} \
  --csv=$OUT/ours.csv > $OUT/grid.log 2>&1
echo "grid rc=$?"; grep -E "^\|" $OUT/grid.log | cut -d'|' -f2-8
unset LD_LIBRARY_PATH
PYTHONUNBUFFERED=1 timeout ${TORCH_TIMEOUT:-120} python3 $B/torch_attention_peers.py \
  --decode-grid --ours $OUT/ours.csv --table $OUT/torch_grid.md > $OUT/torch_grid.log 2>&1
echo "torch grid rc=$?"; grep -E "^\|" $OUT/torch_grid.log
