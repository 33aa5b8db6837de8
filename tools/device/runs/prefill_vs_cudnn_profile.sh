#!/usr/bin/env bash
# One GPU: Nsight Compute over our Hopper prefill, our cuDNN backend (paged) and PyTorch's cuDNN
# SDPA backend (contiguous) at the full-attention shapes where ours trails cuDNN, one launch of
# each, to compare how each kernel is launched (grid, block, cluster, registers, shared memory)
# and what it keeps busy (tensor pipe, L2 and L1 traffic, DRAM).
# Bundle: kernels/attention/bundle_attention_gpu.sh /tmp/attn, packed as .xfer2/attn.tar.xz;
# carry [".xfer2"]. SHAPES picks the prefill shapes (attention_benchmark --prefill-shapes);
# CLOCKS=none profiles at the GPU's own clocks (Nsight Compute locks them to base otherwise).
set -uo pipefail
[ -d /tmp/attn ] || tar xJf .xfer2/attn.tar.xz -C /tmp
A=/tmp/attn; export LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64
export PATH=/usr/local/cuda/bin:$PATH
S=/tmp/prefill_vs_cudnn; rm -rf $S; mkdir -p $S
SHAPES=${SHAPES:-4096:full:128 16384:full:128 4096:full:256}
METRICS=launch__cluster_dim_x,launch__cluster_dim_y,launch__cluster_dim_z,launch__grid_size,\
launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block,\
gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,\
sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,\
lts__t_bytes.sum,lts__t_sector_hit_rate.pct,\
l1tex__m_xbar2l1tex_read_bytes.sum,dram__bytes_read.sum,\
dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,\
sm__inst_executed.sum
profile() {  # name, kernel regex, command...
  local name=$1 regex=$2; shift 2
  timeout 240 ncu --kernel-name "regex:$regex" --launch-skip 1 --launch-count 1 \
    --clock-control ${CLOCKS:-base} --metrics "$METRICS" --csv --page raw "$@" > $S/$name.csv 2> $S/$name.err
  echo "$name rc=$? rows=$(grep -c '^"' $S/$name.csv)"
}
for shape in $SHAPES; do
  tag=${shape//:/_}
  profile ours_$tag PrefillSm90Kernel $A/bin/attention_benchmark --only=prefill --prefill-shapes=$shape
  profile cudnn_paged_$tag 'sdpa|fprop|fmha|cudnn' $A/bin/attention_benchmark --only=prefill --prefill-shapes=$shape
  profile torch_cudnn_$tag 'sdpa|fprop|fmha|cudnn' \
    python3 "$(dirname "$0")/torch_cudnn_prefill.py" "$shape"
done
python3 - "$S" <<'EOF' > $S/summary.txt  # the CSV rows among the programs' own output
import csv, glob, os, sys
keys = ["Kernel Name", "launch__grid_size", "launch__block_size", "launch__cluster_dim_x",
        "launch__cluster_dim_y", "launch__registers_per_thread", "launch__shared_mem_per_block",
        "gpu__time_duration.sum", "sm__cycles_elapsed.avg.per_second", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
        "lts__t_bytes.sum",
        "l1tex__m_xbar2l1tex_read_bytes.sum", "lts__t_sector_hit_rate.pct", "dram__bytes_read.sum",
        "sm__inst_executed.sum"]
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.csv"))):
    rows = list(csv.reader(line for line in open(path) if line.startswith('"')))
    if len(rows) < 3:
        print(os.path.basename(path), "no rows"); continue
    header, units, data = rows[0], rows[1], rows[2]
    print("==", os.path.basename(path))
    for k in keys:
        if k in header:
            i = header.index(k)
            print(f"  {k} = {data[i]} {units[i]}"[:200])
EOF
cat $S/summary.txt
tar czf $OUT/prefill_vs_cudnn.tgz -C $S .
