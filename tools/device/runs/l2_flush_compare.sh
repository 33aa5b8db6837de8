#!/usr/bin/env bash
# One GPU: the decode grid timed after each of the two L2 flushes (a memset, which leaves the
# L2 full of dirty lines, and a read, which leaves it clean), each beside a read of as many
# bytes timed the same way and PyTorch's SDPA backends flushed the same way, after the timing
# loop's GPU tests (the daemon's cold-L2 path now flushes by a read). Here:
#   flock /tmp/gpuprof_pack.lock sh -c 'kernels/attention/bundle_attention_gpu.sh /tmp/attn &&
#     bazel build //measure:timing_loop_gpu_test && cp -L bazel-bin/measure/timing_loop_gpu_test
#     /tmp/attn/bin/ && tar cJf .xfer/attn_decode_grid.tar.xz -C /tmp attn'
# then this script with carry [".xfer/attn_decode_grid.tar.xz"]. GRID_ARGS narrows the grid.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/bundle && tar xJf .xfer/attn_decode_grid.tar.xz -C /tmp/bundle
B=/tmp/bundle/attn
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
timeout 120 $B/bin/timing_loop_gpu_test > $OUT/timing_loop_test.log 2>&1
echo "timing loop tests rc=$?"; grep -E "^\[  (FAILED|PASSED)|tests? ran" $OUT/timing_loop_test.log
GRID=${GRID_ARGS:---groups=1,4,8 --batches=1,32,64,128 --kv-lens=1024,4096,16384}
for flush in write read; do
  timeout 200 $B/bin/attention_benchmark --decode-grid $GRID --flush=$flush \
    --csv=$OUT/ours_$flush.csv > $OUT/grid_$flush.log 2>&1
  echo "grid ($flush flush) rc=$?"; grep -E "^\|" $OUT/grid_$flush.log | cut -d'|' -f2-9
done
unset LD_LIBRARY_PATH
for flush in write read; do
  PYTHONUNBUFFERED=1 timeout 200 python3 $B/torch_attention_peers.py --decode-grid \
    --ours $OUT/ours_$flush.csv --table $OUT/torch_$flush.md > $OUT/torch_$flush.log 2>&1
  echo "torch grid ($flush flush) rc=$?"; grep -E "^\|" $OUT/torch_$flush.log
done
