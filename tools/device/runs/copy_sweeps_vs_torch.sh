#!/usr/bin/env bash
# The copy kernels through gpuprofd sweeps at the hidden sizes and KV layouts of released
# models, 1 to 64Ki tokens, with PyTorch's peers on the same GPU in the same run; then the
# throughput of a 100-point sweep. SWEEP_GPUS: how many GPUs the sweeps spread over (1 or 2).
# Leaves the daemon's database in $OUT so plots can be drawn where gnuplot is installed.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
# Binaries rebuilt after the bundle was packed (e.g. the worker after a kernel change).
[ -d .xfer2 ] && cp -f .xfer2/* .carry/bin/
B=$PWD/.carry/bin; export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
if [ -n "${COPY_KERNEL_TESTS:-}" ]; then
  TEST_SRCDIR=$PWD/.carry/runfiles TEST_WORKSPACE=. timeout 120 $B/copy_kernels_gpu_test 2>&1 | tail -3
fi
. tools/device/runs/start_gpuprofd.sh
S=/tmp/sweeps; mkdir -p $S
gpus=${SWEEP_GPUS:-1}
start_gpuprofd $S
# As copy_workloads_benchmark times (graph mode, like the torch peers), no tracing.
M="--graph 20 --warmup 5 --min-iters 10 --max-iters 200 --time-budget 300ms --trace off --gpu-count 1"
TOKENS=1,64,512,4Ki,16Ki,64Ki
# Hidden sizes of released models from 1024 to 16384 (Qwen3-0.6B ... Llama-3.1-405B).
HIDDEN=1024,1536,2048,2304,2560,3072,3584,3840,4096,4608,5120,5376,6144,7168,8192,12288,16384
sweeps=()
id=$($G sweep index --tokens $TOKENS --hidden $HIDDEN --dtype bf16 $M | awk '{print $2}' | tr -d :)
sweeps+=($id); echo "index sweep $id" | tee -a $S/sweeps.txt
# KV layouts (kv heads x head_dim): MQA 1x256 (Gemma-2B), 2x128, 4x128 (Qwen2.5-7B), 8x64,
# 8x128 (Llama-3), 8x256 (Gemma-2-9B), 16x128 (Gemma-2-27B), 32x96 (Phi-3-mini), 32x128
# (Llama-2-7B), 40x128 (Llama-2-13B).
for layout in 1x256 2x128 4x128 8x64 8x128 8x256 16x128 32x96 32x128 40x128; do
  id=$($G sweep store --tokens $TOKENS --kv-heads ${layout%x*} --head-dim ${layout#*x} \
       --dtype bf16 $M | awk '{print $2}' | tr -d :)
  sweeps+=($id); echo "store $layout sweep $id" | tee -a $S/sweeps.txt
done
for id in "${sweeps[@]}"; do $G sweep watch $id --format csv > $S/$id.csv 2>>$S/watch.log; done
for id in "${sweeps[@]}"; do $G sweep get $id --format markdown > $S/$id.md 2>&1; done
args=(); for id in "${sweeps[@]}"; do args+=(--sweep $id); done
python3 bench/sweep_torch_peers.py --gpuprof $B/gpuprof --target unix:$state/sock "${args[@]}" \
  --out-dir $S/peers > $S/peers.log 2>&1
tail -5 $S/peers.log
grep -E "^\| (index|store) t=(4096|16384|65536)" $S/peers/table.md | awk -F'|' '{print $2,"|",$6,"|",$7,"|",$9,"|",$10,"|",$11}' | head -80
if which gnuplot >/dev/null 2>&1; then $G sweep plot ${sweeps[0]} -o $S/index.svg --y pct-of-copy; fi
# Throughput: 100 small points, then single points one after another.
[ -x $B/sweep_throughput_benchmark ] && timeout 240 $B/sweep_throughput_benchmark \
  --target=unix:$state/sock --workload=index --gpu_count=$gpus 2>&1 | tail -15 | tee $S/throughput.txt
kill -TERM $daemon; wait $daemon
tar czf $OUT/sweeps.tgz -C $S --exclude=sock .
