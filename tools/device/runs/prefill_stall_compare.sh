#!/usr/bin/env bash
# One GPU: Nsight Compute over builds of the Hopper prefill at the GPU's own clocks (no clock
# control), one launch each, with per-instruction stall samples (the SASS source page as CSV),
# warp states, the scheduler and the memory tables: to compare two kernels instruction by
# instruction where their times differ but their instruction counts do not. summary.md sets the
# kernels side by side (stall_summary.py).
# Bundle: kernels/attention/bundle_attention_gpu.sh /tmp/attn with the builds copied into its
# bin/, packed as .xfer2/attn.tar.xz; carry [".xfer2"].
# BENCHES: NAME=PATH ... (builds of attention_benchmark; PATH "torch-cudnn": PyTorch's cuDNN SDPA
# backend on the same shape, contiguous K/V); SHAPES: --prefill-shapes entries, space-separated;
# CLOCKS: Nsight Compute's --clock-control (none by default).
set -uo pipefail
[ -d /tmp/attn ] || tar xJf .xfer2/attn.tar.xz -C /tmp
A=/tmp/attn; export LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64
export PATH=/usr/local/cuda/bin:$PATH
S=/tmp/prefill_stalls; rm -rf $S; mkdir -p $S
SHAPES=${SHAPES:-4096:full:128}
BENCHES=${BENCHES:-ours=$A/bin/attention_benchmark}
METRICS=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__inst_executed.sum,\
dram__bytes_read.sum,lts__t_sector_hit_rate.pct,lts__t_bytes.sum,\
sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
ncu --version | tail -1 > $S/ncu_version.txt
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $S/gpu.txt
csvs=()
for shape in $SHAPES; do
  for bench in $BENCHES; do
    name=${bench%%=*}_${shape//:/_}
    regex=PrefillSm90; command=("${bench#*=}" --quick --only=prefill --prefill-shapes="$shape")
    if [ "${bench#*=}" = torch-cudnn ]; then
      regex='sdpa|fprop|fmha|cudnn'
      command=(python3 "$(dirname "$0")/torch_cudnn_prefill.py" "$shape")
    fi
    timeout 300 ncu --kernel-name "regex:$regex" --launch-skip 1 --launch-count 1 \
      --clock-control "${CLOCKS:-none}" --section WarpStateStats --section SchedulerStats \
      --section SpeedOfLight --section SourceCounters --section MemoryWorkloadAnalysis \
      --section LaunchStats --metrics "$METRICS" --import-source no -o $S/$name \
      "${command[@]}" > $S/$name.log 2>&1
    echo "$name ncu rc=$?"
    ncu -i $S/$name.ncu-rep --page details > $S/$name.details.txt 2>&1
    ncu -i $S/$name.ncu-rep --page raw --csv > $S/$name.raw.csv 2>&1
    ncu -i $S/$name.ncu-rep --page source --print-source sass --csv > $S/$name.sass.csv 2>&1
    csvs+=($S/$name.sass.csv)
    grep -E "^  [A-Za-z]|Duration|SM Frequency|Warp Cycles Per Issued|Issued Ipc|No Eligible|Executed Instructions " \
      $S/$name.details.txt | grep -E "Prefill|sdpa|fprop|Duration|Frequency|Warp Cycles|Issued Ipc|No Eligible|Executed Instructions " | head -8
  done
done
# Side by side, in the order of SHAPES and BENCHES (the first is the others' baseline).
python3 "$(dirname "$0")/stall_summary.py" "${csvs[@]}" > $S/summary.md 2>&1
rm -f $S/*.ncu-rep
tar czf $OUT/prefill_stalls.tgz -C $S .
