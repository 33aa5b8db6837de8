#!/usr/bin/env bash
# Custom kernels on one GPU: the gpu-tagged tests of workloads/custom_kernel and the two
# end-to-end suites (index, store, decode: correct, wrong, out of bounds, never returning, not
# compiling; sanitize), then through the CLI against a real daemon: our kernel and the same
# algorithm submitted as a custom kernel, back to back twice each and compared; the worked
# examples; get --source, sass, a profile run's stalls by SASS line, a compile error's exit
# code, a sweep over kernel files, and the board of each shape.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
B=$PWD/.carry
S=${OUT:-/tmp/ck}; mkdir -p $S
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TEST_SRCDIR=$B/runfiles TEST_WORKSPACE=. TEST_TMPDIR=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH
for binary in daemon/gpuprofd worker/gpuprof_worker client/gpuprof; do
  mkdir -p "$B/runfiles/$(dirname $binary)"; ln -sf "$B/bin/$(basename $binary)" "$B/runfiles/$binary"
done
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > $S/host.txt
for t in ${CK_TESTS:-custom_kernel_plan_gpu_test custom_kernel_gpu_e2e_test custom_kernel_decode_gpu_e2e_test}; do
  start=$(date +%s)
  if timeout 300 $B/bin/$t > $S/$t.log 2>&1; then r=PASS; else r=FAIL; fi
  echo "$r $t ($(( $(date +%s) - start )) s)"; [ $r = FAIL ] && tail -40 $S/$t.log
done
state=$(mktemp -d)
$B/bin/gpuprofd --state_dir=$state --listen=unix:$state/sock --worker_binary=$B/bin/gpuprof_worker \
  > $S/gpuprofd.log 2>&1 &
daemon=$!
G() { echo "\$ gpuprof $*" >> $S/cli.txt; $B/bin/gpuprof --target=unix:$state/sock "$@" >> $S/cli.txt 2>&1; echo "rc=$?" >> $S/cli.txt; }
for _ in $(seq 1 300); do $B/bin/gpuprof --target=unix:$state/sock health >/dev/null 2>&1 && break; sleep 0.2; done
E=examples/custom_kernels; T=tests/e2e/custom_kernels
IDX="--gpus 0 --tokens 16384 --hidden 7168"
BUILTIN="--kernel-file $E/index_builtin_gather.cu --kernel-name builtin_gather --block-threads 128 --items-per-block 4"
G submit index $IDX --follow                      # 1 ours
G submit index $IDX $BUILTIN --follow             # 2 our algorithm, submitted
G submit index $IDX --follow                      # 3 ours
G submit index $IDX $BUILTIN --follow             # 4
G compare exp-000001 exp-000002
G compare exp-000003 exp-000004
G compare exp-000001 exp-000003
G submit index $IDX --kernel-file $E/index_gather.cu --block-threads 256 --items-per-block 8 --follow   # 5
G get exp-000005
$B/bin/gpuprof --target=unix:$state/sock get exp-000005 --source | cmp - $E/index_gather.cu && echo "get --source: identical" >> $S/cli.txt
G sass exp-000005
G submit index $IDX --kernel-file $E/index_gather.cu --block-threads 256 --items-per-block 8 --kernel-option -lineinfo --mode profile --follow  # 6
G sass exp-000006
G submit store --gpus 0 --tokens 16384 --kv-heads 8 --head-dim 128 --follow   # 7
G submit store --gpus 0 --tokens 16384 --kv-heads 8 --head-dim 128 --kernel-file $E/store_scatter.cu --block-threads 256 --items-per-block 8 --follow  # 8
G compare exp-000007 exp-000008
D="--gpus 0 --phase decode --batch 32 --kv-len 4096 --heads 32 --kv-heads 8"
G submit attention $D --follow   # 9
G submit attention $D --kernel-file $E/decode_paged.cu --block-threads 256 --follow  # 10
G compare exp-000009 exp-000010
G get exp-000010
G submit index $IDX --kernel-file $T/index_does_not_compile.cu --follow   # 11: exit 2
G submit index $IDX --kernel-file $T/index_wrong.cu --mode test --follow  # 12
G submit attention $D --kernel-file $E/decode_paged.cu --block-threads 256 --mode sanitize --follow  # 13
G get exp-000013
G sweep index --gpu-count 1 --tokens 4Ki,16Ki --hidden 7168 --kernel-file ours,$E/index_gather.cu --follow
G board index --tokens 16384 --hidden 7168
G board store --tokens 16384 --kv-heads 8 --head-dim 128
G board attention --phase decode --batch 32 --kv-len 4096 --heads 32 --kv-heads 8
G list
kill -TERM $daemon; wait $daemon
cp $state/*.log $S/ 2>/dev/null
cat $S/cli.txt | cut -c1-240 | head -400
