#!/usr/bin/env bash
# The runs a worker makes again in a child process (workloads/child_run), on one GPU through a
# real daemon and the CLI: an index experiment under ncu (report fetched and opened with
# `ncu --import`), the decode example under compute-sanitizer memcheck (no errors), and a kernel
# that reads out of bounds under memcheck (its errors named, with the source line).
# Bundle: BUNDLE_GPU_TESTS=0 flock /tmp/gpuprof_pack.lock tools/device/pack.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
B=$PWD/.carry
E=$PWD/examples/custom_kernels
T=$PWD/tests/e2e/custom_kernels
S=${OUT:-/tmp/child_runs}; mkdir -p $S
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=index,name,driver_version --format=csv > $S/host.txt
{ ncu --version | tail -1; compute-sanitizer --version | tail -1; } >> $S/host.txt 2>&1
state=$(mktemp -d)
$B/bin/gpuprofd --state_dir=$state --listen=unix:$state/sock --worker_binary=$B/bin/gpuprof_worker \
  > $S/gpuprofd.log 2>&1 &
daemon=$!
P() { $B/bin/gpuprof --target=unix:$state/sock "$@"; }
G() { echo "\$ gpuprof $*" >> $S/cli.txt; start=$(date +%s%N); P "$@" >> $S/cli.txt 2>&1; rc=$?
      echo "rc=$rc ($(( ($(date +%s%N) - start) / 1000000 )) ms)" >> $S/cli.txt; return $rc; }
for _ in $(seq 1 300); do P health >/dev/null 2>&1 && break; sleep 0.2; done
G submit index --gpus 0 --tokens 16384 --hidden 7168 --capture ncu --follow              # 1
G report exp-000001 -o $S/exp-000001.ncu-rep
ncu --import $S/exp-000001.ncu-rep --page details > $S/ncu_details.txt 2>&1
echo "ncu --import rc=$?" >> $S/cli.txt
D="--gpus 0 --phase decode --batch 32 --kv-len 4096 --heads 32 --kv-heads 8"
G submit attention $D --kernel-file $E/decode_paged.cu --block-threads 256 --mode sanitize --follow  # 2
G get exp-000002
G submit attention $D --kernel-file $T/decode_out_of_bounds.cu --block-threads 256 --mode sanitize --follow  # 3
G get exp-000003
kill $daemon; wait $daemon
cat $S/host.txt; cut -c1-400 $S/cli.txt; head -40 $S/ncu_details.txt
