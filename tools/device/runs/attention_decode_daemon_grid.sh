#!/usr/bin/env bash
# One GPU: the decode grid of the kernel-performance issue as sweeps through gpuprofd (8 KV
# heads x GQA group, d128 unless DECODE_HEAD_DIM, bf16, page 16, pages scattered unless DECODE_SEED=0, L2 flushed
# before every sample), our kernels and our cuDNN backend as one axis, then PyTorch's flash and cuDNN SDPA backends on
# the same shapes in the same call (bench/sweep_torch_peers.py -> torch_attention_peers.py).
# Here: `tools/device/pack.sh` (or BUNDLE_GPU_TESTS=0 for the daemon, worker and CLI only),
# then this script with carry [".xfer/carry.tar.xz"].
#   DECODE_GROUPS, DECODE_BATCHES, DECODE_KVS: the axes (a small grid unless FULL=1: groups 1-8 x batch
#   1/32/64/128/256 x KV 1k-32k, b256 x 32k left out for its 32 GiB); DECODE_HEAD_DIM: 128 unless
#   given (64 or 256); DECODE_SEED: 7 (pages scattered) unless given (0: each sequence's pages
#   in order, as PyTorch's contiguous K/V are).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
B=$PWD/.carry/bin; export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
. tools/device/runs/start_gpuprofd.sh
S=/tmp/decode_sweeps; mkdir -p $S
start_gpuprofd $S
heads() { local out=(); for g in ${1//,/ }; do out+=($((8 * g))); done; local IFS=,; echo "${out[*]}"; }
SHAPE="--phase decode --num-kv-heads 8 --head-dim ${DECODE_HEAD_DIM:-128} --dtype bf16 --page-size 16 --seed ${DECODE_SEED:-7}"
M="--backend gpuprof,cudnn --l2 cold --warmup 3 --min-iters 10 --max-iters 100 --time-budget 300ms --trace off --gpu-count 1"
if [ "${FULL:-0}" = 1 ]; then
  sets=("1,2,3,4,5,6,7,8 1,32,64,128 1024,4096,16384,32768" "1,2,3,4,5,6,7,8 256 1024,4096,16384")
else
  sets=("${DECODE_GROUPS:-1,5,8} ${DECODE_BATCHES:-1,32,128} ${DECODE_KVS:-1024,16384}")
fi
sweeps=()
for set in "${sets[@]}"; do
  read -r groups batches kvs <<< "$set"
  id=$($G sweep attention $SHAPE --num-qo-heads $(heads $groups) --batch-size $batches \
       --kv-len $kvs $M | awk '{print $2}' | tr -d :)
  sweeps+=($id); echo "decode sweep $id: groups $groups x batch $batches x kv $kvs" | tee -a $S/sweeps.txt
done
start=$(date +%s)
for id in "${sweeps[@]}"; do $G sweep watch $id --format csv > $S/$id.csv 2>>$S/watch.log; done
echo "sweeps took $(( $(date +%s) - start )) s" | tee -a $S/sweeps.txt
for id in "${sweeps[@]}"; do $G sweep get $id --format markdown > $S/$id.md 2>&1; done
args=(); for id in "${sweeps[@]}"; do args+=(--sweep $id); done
PYTHONUNBUFFERED=1 timeout ${TORCH_TIMEOUT:-400} python3 bench/sweep_torch_peers.py \
  --gpuprof $B/gpuprof --target unix:$state/sock "${args[@]}" --out-dir $S/peers > $S/peers.log 2>&1
echo "peers rc=$?"; tail -3 $S/peers.log
cat $S/peers/decode_table.md 2>/dev/null
if which gnuplot >/dev/null 2>&1; then
  $G sweep plot ${sweeps[0]} -o $S/decode.svg --y pct-of-copy --x batch_size 2>&1 | tail -1
fi
kill -TERM $daemon; wait $daemon
tar czf $OUT/decode_sweeps.tgz -C $S --exclude=sock .
