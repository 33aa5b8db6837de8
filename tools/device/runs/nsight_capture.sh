#!/usr/bin/env bash
# Nsight captures on one GPU through a real daemon and the CLI: an index experiment submitted
# with --capture ncu (the default filter and set, then the full set over two launches), its
# report fetched with `gpuprof report` and opened with `ncu --import ... --page details`; nsys
# is looked for too and, where it is not installed, --capture nsys is refused at admission
# naming where it was looked for (where it is, the same run with `nsys stats`). Without an nsys on
# PATH, the one Nsight Compute ships (host/target-linux-x64/nsys, whose report importer needs
# libdw.so.1: .xfer/nsys_libs.tar.gz, Debian 12's libdw1 and libelf1, where the machine lacks it)
# is given to the daemon with --nsys_path.
# Bundle: BUNDLE_GPU_TESTS=0 flock /tmp/gpuprof_pack.lock tools/device/pack.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tar xJf .xfer/carry.tar.xz
B=$PWD/.carry
S=${OUT:-/tmp/nsight}; mkdir -p $S
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
nsys_bin=$(command -v nsys || ls /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | tail -1)
if [ -f .xfer/nsys_libs.tar.gz ]; then
  mkdir -p /tmp/nsys_libs && tar xzf .xfer/nsys_libs.tar.gz -C /tmp/nsys_libs
  export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/tmp/nsys_libs
fi
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > $S/host.txt
{ command -v ncu && ncu --version | tail -1; echo "nsys: ${nsys_bin:-none}"; [ -n "$nsys_bin" ] && $nsys_bin --version; } >> $S/host.txt 2>&1
state=$(mktemp -d)
$B/bin/gpuprofd --state_dir=$state --listen=unix:$state/sock --worker_binary=$B/bin/gpuprof_worker \
  ${nsys_bin:+--nsys_path=$nsys_bin} > $S/gpuprofd.log 2>&1 &
daemon=$!
P() { $B/bin/gpuprof --target=unix:$state/sock "$@"; }
G() { echo "\$ gpuprof $*" >> $S/cli.txt; start=$(date +%s%N); P "$@" >> $S/cli.txt 2>&1; rc=$?
      echo "rc=$rc ($(( ($(date +%s%N) - start) / 1000000 )) ms)" >> $S/cli.txt; return $rc; }
for _ in $(seq 1 300); do P health >/dev/null 2>&1 && break; sleep 0.2; done
IDX="--gpus 0 --tokens 16384 --hidden 7168"
G submit index $IDX --capture ncu --follow                                             # 1
G submit index $IDX --capture ncu --ncu-set full --ncu-launch-count 2 --follow          # 2
G submit index $IDX --capture ncu --ncu-kernel regex:IndexKernel --follow               # 3
G submit index $IDX --capture nsys --follow                                            # 4 or refused
G submit radix --requests 200 --capture ncu                                            # refused
D="--gpus 0 --phase decode --batch 32 --kv-len 4096 --heads 32 --kv-heads 8"
G submit attention $D --capture ncu --ncu-launch-count 3 --follow                       # 4 or 5
G submit index $IDX --capture ncu --ncu-set no-such-set --follow                        # refused: not a set of this ncu
for id in exp-000001 exp-000002 exp-000003 exp-000004 exp-000005; do
  ext=$(P get $id 2>/dev/null | grep -o -m1 '\.nsys-rep\|\.ncu-rep' || echo .ncu-rep)
  G report $id -o $S/$id$ext
done
G report exp-000001 -o $S/exp-000001.ncu-rep                                           # exists: 2
P get exp-000001 --json > $S/exp-000001.json 2>&1
P get exp-000002 --json > $S/exp-000002.json 2>&1
G get exp-000001
for f in $S/*.ncu-rep; do
  [ -f "$f" ] || continue
  echo "== $f ($(stat -c %s $f) bytes, sha256 $(sha256sum $f | cut -c1-64))" >> $S/import.txt
  ncu --import "$f" --page details > $f.details.txt 2>&1; echo "ncu --import rc=$?" >> $S/import.txt
  head -60 $f.details.txt >> $S/import.txt
done
for f in $S/*.nsys-rep; do
  [ -f "$f" ] || continue
  ${nsys_bin:-nsys} stats "$f" > $f.stats.txt 2>&1; echo "nsys stats $f rc=$?" >> $S/import.txt
  head -60 $f.stats.txt >> $S/import.txt
done
ls -la $state/reports >> $S/import.txt
kill $daemon; wait $daemon
cat $S/host.txt; cat $S/cli.txt | cut -c1-300; grep -E "ncu:|nsys:" $S/gpuprofd.log; cat $S/import.txt | cut -c1-200
