#!/usr/bin/env bash
# One GPU: the prefill targets of the kernel-performance issue as sweeps through gpuprofd (bf16,
# page 16, L2 flushed before every sample): head_dim 64/128 (32 query, 8 KV heads) and 256 (16/8,
# as Gemma 2 9B) x 2k-16k tokens, causal and full, plus a ragged batch at each head_dim; our
# kernels and our cuDNN backend as one axis. Then PyTorch's flash and cuDNN SDPA backends on the
# uniform shapes in the same call (bench/sweep_torch_peers.py -> torch_attention_peers.py
# --prefill-grid). Here: `tools/device/pack.sh` (or BUNDLE_GPU_TESTS=0), then this script with
# carry [".xfer/carry.tar.xz"]. PREFILL_DIMS, PREFILL_LENS, RAGGED narrow it.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
B=$PWD/.carry/bin; export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
. tools/device/runs/start_gpuprofd.sh
S=/tmp/prefill_sweeps; rm -rf $S; mkdir -p $S
start_gpuprofd $S
M="--phase prefill --dtype bf16 --page-size 16 --causal=true,false --backend gpuprof,cudnn --l2 cold --warmup 2 --min-iters 10 --max-iters 50 --time-budget 500ms --trace off --gpu-count 1"
# A serving engine's mixed batch: short and long prompts, one longer than its neighbours.
RAGGED=${RAGGED:-512,1024,1536,2048,3072,4096,6144,8192}
sweeps=()
submit() {  # description, then the sweep's flags
  local what=$1; shift
  local id
  id=$($G sweep attention "$@" $M | awk '{print $2}' | tr -d :)
  sweeps+=($id); echo "prefill sweep $id: $what" | tee -a $S/sweeps.txt
}
for dim in ${PREFILL_DIMS:-64 128 256}; do
  heads="--num-qo-heads 32 --num-kv-heads 8"; [ $dim = 256 ] && heads="--num-qo-heads 16 --num-kv-heads 8"
  for len in ${PREFILL_LENS:-2048 4096 8192 16384}; do
    submit "d$dim $len x $len" $heads --head-dim $dim --q-len $len --kv-len $len
  done
  [ -n "$RAGGED" ] && submit "d$dim ragged $RAGGED" $heads --head-dim $dim --q-lens $RAGGED --kv-lens $RAGGED
done
start=$(date +%s)
for id in "${sweeps[@]}"; do $G sweep watch $id --format csv > $S/$id.csv 2>>$S/watch.log; done
echo "sweeps took $(( $(date +%s) - start )) s" | tee -a $S/sweeps.txt
args=(); for id in "${sweeps[@]}"; do args+=(--sweep $id); done
PYTHONUNBUFFERED=1 timeout ${TORCH_TIMEOUT:-300} python3 bench/sweep_torch_peers.py \
  --gpuprof $B/gpuprof --target unix:$state/sock "${args[@]}" --out-dir $S/peers > $S/peers.log 2>&1
echo "peers rc=$?"; grep -v "^  done" $S/peers.log | tail -3
cat $S/peers/prefill_table.md 2>/dev/null
kill -TERM $daemon; wait $daemon
tar czf $OUT/prefill_sweeps.tgz -C $S --exclude=sock .
