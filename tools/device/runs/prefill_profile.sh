#!/usr/bin/env bash
# One GPU: Nsight Compute over the Hopper prefill kernel (head_dim 128, 4k causal and full, the
# first prefill shapes of attention_benchmark --only=prefill --quick), with per-instruction stall
# samples (the SASS source page as CSV) to see where the consumers and the producer wait.
# Bundle: tools/device/pack.sh; carry [".xfer/carry.tar.xz"]. PROFILE_SKIP picks the launch.
set -uo pipefail
[ -d .carry/bin ] || tar xJf .xfer/carry.tar.xz
B=$PWD/.carry/bin; export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64
export PATH=/usr/local/cuda/bin:$PATH
S=/tmp/prefill_profile; rm -rf $S; mkdir -p $S
ncu --version | tail -1 > $S/ncu_version.txt
timeout 300 ncu --kernel-name regex:PrefillSm90Kernel --launch-skip ${PROFILE_SKIP:-2} --launch-count 1 \
  --set full --import-source no -o $S/prefill $B/attention_benchmark --only=prefill --quick \
  > $S/ncu_run.log 2>&1
echo "ncu rc=$?"; tail -3 $S/ncu_run.log
ncu -i $S/prefill.ncu-rep --page details > $S/details.txt 2>&1
ncu -i $S/prefill.ncu-rep --page source --print-source sass --csv > $S/sass.csv 2>$S/sass.err
echo "sass rows: $(wc -l < $S/sass.csv)"
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Shared Memory Configuration|Block Limit|Warp Cycles Per Issued" $S/details.txt | head -20
tar czf $OUT/prefill_profile.tgz -C $S .
