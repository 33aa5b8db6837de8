#!/usr/bin/env bash
# On 2 GPUs: (1) the daemon's all-reduce, graphs and eager batches, beside NCCL driven directly
# in the same run; (2) NCCL's tuning log (which algorithm and protocol it picks per size);
# (3) a rank stopped with SIGSTOP mid-collective: the experiment must end near its deadline,
# name the rank, free both GPUs, and the next collective on them must run.
# Needs .xfer/carry.tar.xz; binaries rebuilt since (worker, CLI, daemon) may sit in .xfer2/.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
[ -d .xfer2 ] && cp -f .xfer2/* .carry/bin/
B=$PWD/.carry/bin; export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
S=/tmp/x2; mkdir -p $S; state=$S/state; mkdir -p $state
$B/gpuprofd --state_dir=$state --listen=unix:$state/sock --worker_binary=$B/gpuprof_worker \
  > $S/gpuprofd.log 2>&1 &
daemon=$!
G="$B/gpuprof --target=unix:$state/sock"
for _ in $(seq 1 300); do $G health >/dev/null 2>&1 && break; sleep 0.2; done
$G gpus | tee $S/gpus.txt
AR="submit collective --gpus 0,1 --op all-reduce --dtype fp32 --min-bytes 8 --max-bytes 1G --step-factor 8"
echo "== graphs";  $G $AR --follow > $S/graph.txt 2>&1; grep -E "^ +[0-9.]+ [KMG]?B " $S/graph.txt | head -12
echo "== eager";   $G $AR --eager --follow > $S/eager.txt 2>&1; grep -E "^ +[0-9.]+ [KMG]?B |^ *timing:" $S/eager.txt | head -12
echo "== all-gather, registered buffers"
$G submit collective --gpus 0,1 --op all-gather --dtype bf16 --buffer-mode registered --min-bytes 1K \
  --max-bytes 64M --step-factor 16 --follow > $S/allgather.txt 2>&1
grep -E "^ +[0-9.]+ [KMG]?B " $S/allgather.txt | head -8
echo "== SIGSTOP one rank mid-collective (timeout 30 s)"
id=$($G submit collective --gpus 0,1 --op all-reduce --dtype fp32 --min-bytes 256M --max-bytes 256M \
     --min-iters 100000 --timeout 30s 2>&1 | grep -oE "exp-[0-9]+" | head -1)
echo "submitted $id"
uuid1=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 1 | tr -d ' ')
for _ in $(seq 1 200); do $G get $id 2>/dev/null | grep -qE "timed|TIMED|samples" && break; sleep 0.1; done
sleep 3
victim=""
for pid in $(pgrep -f gpuprof_worker); do
  if tr '\0' '\n' < /proc/$pid/environ 2>/dev/null | grep -q "CUDA_VISIBLE_DEVICES=$uuid1"; then victim=$pid; fi
done
echo "rank on GPU 1: pid $victim"; t0=$(date +%s.%N)
kill -STOP $victim
$G watch $id > $S/stopped_watch.txt 2>&1; t1=$(date +%s.%N)
echo "watch returned after $(python3 -c "print(round($t1 - $t0, 1))") s"
$G get $id > $S/stopped_get.txt 2>&1; grep -E "state|reason|rank|ended|started" $S/stopped_get.txt | head -12
ps -o pid,stat,cmd -p $victim 2>&1 | tail -1
$G gpus | tee $S/gpus_after.txt
$G submit collective --gpus 0,1 --op all-reduce --dtype fp32 --min-bytes 8 --max-bytes 64M --step-factor 64 --follow > $S/next.txt 2>&1
echo "next collective:"; grep -E "state|SUCCEEDED|FAILED|^ +[0-9.]+ [KMG]?B " $S/next.txt | head -8
kill -TERM $daemon; wait $daemon
echo "== NCCL driven directly (daemon stopped)"
timeout 200 $B/collective_benchmark --ops=all_reduce --modes=device --dtype=fp32 --min_bytes=8 \
  --max_bytes=1073741824 --step_factor=8 --nonblocking_variant=false > $S/direct.log 2>&1; echo "rc=$?"
tail -14 $S/direct.log
echo "== NCCL's tuning log (NCCL_DEBUG_SUBSYS=TUNING)"
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING timeout 100 $B/collective_benchmark --ops=all_reduce \
  --modes=device --dtype=fp32 --min_bytes=8 --max_bytes=67108864 --step_factor=64 \
  --nonblocking_variant=false > $S/tuning.log 2>&1
grep -E "Algo|algo|proto" $S/tuning.log | sort | uniq -c | sort -rn | head -20
cp $S/*.txt $S/*.log $OUT/ 2>/dev/null
