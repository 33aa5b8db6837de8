#!/usr/bin/env bash
# Draws the decode grid's two figures from decode_table.md files that bench/sweep_torch_peers.py
# wrote (one per GPU): ours / PyTorch's best SDPA backend, and ours as % of the measured copy
# bandwidth, every shape ordered batch, KV length, GQA group. Needs gnuplot.
#   bench/plot_decode_grid.sh OUT_DIR LABEL=decode_table.md [LABEL=decode_table.md ...]
# Tables plotted together must hold the same shapes. PREFIX names the files (PREFIX_vs_pytorch.svg,
# PREFIX_pct_of_copy.svg; decode_grid unless given), TITLE heads both figures, RATIO_RANGE is the
# first figure's y range.
set -euo pipefail
prefix=${PREFIX:-decode_grid}
title=${TITLE:-Decode through gpuprofd}
out=$1; shift
mkdir -p "$out"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
series=(); colours=("#1f77b4" "#d62728" "#2ca02c" "#9467bd"); i=0
for spec in "$@"; do
  label=${spec%%=*}; table=${spec#*=}
  # Table columns: group, batch, kv, ours us, ours % copy, kernel, flash us, cudnn us, ...
  # Data columns: shape number, batch, kv, group, ours vs best PyTorch, ours % copy.
  grep '^| [0-9]' "$table" | awk -F'|' '{fl = $8 + 0; cu = $9 + 0; best = cu;
      if (fl > 0 && (cu == 0 || fl < cu)) best = fl;
      printf "%d %d %d %.4f %.2f\n", $3, $4, $2, best / $5, $6 + 0}' |
    sort -k1,1n -k2,2n -k3,3n | awk '{print NR, $0}' > "$work/$i.dat"
  series+=("\"$work/$i.dat\" using 1:COLUMN with points pt 7 ps 0.5 lc rgb \"${colours[$i]}\" title \"$label\"")
  i=$((i + 1))
done
shapes=$(wc -l < "$work/0.dat")
# Batch boundaries and labels from the first table's order.
ticks=$(awk '{b[$2] = b[$2] ? b[$2] : NR; last[$2] = NR} END {for (k in b) printf "%s \"b%s\" %d\n", "", k, (b[k] + last[k]) / 2}' "$work/0.dat" | sort -t' ' -k3n | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2}')
edges=$(awk 'NR > 1 && $2 != prev {printf "%s ", NR - 0.5} {prev = $2}' "$work/0.dat")
plot() {  # file title ylabel yrange column reference reference_title
  local joined; joined=$(printf '%s, ' "${series[@]}"); joined=${joined%, }
  gnuplot <<GP
set terminal svg size 900,420 font "sans,11"
set output "$out/$1"
set title "$2"
set xlabel "shapes ($shapes): by batch, then KV length 1k-32k, then GQA group 1-8"
set ylabel "$3"
set yrange [$4]
set xrange [0:$((shapes + 1))]
set grid ytics
set key bottom right
set xtics ($ticks)
do for [x in "$edges"] { set arrow from x, graph 0 to x, graph 1 nohead lc rgb "#bbbbbb" dt 2 }
plot $6 with lines lc rgb "black" dt 3 title "$7", ${joined//COLUMN/$5}
GP
  echo "wrote $out/$1"
}
plot "${prefix}_vs_pytorch.svg" "$title: ours / PyTorch's best SDPA backend" \
  "ours vs best PyTorch (>1: ours faster)" "${RATIO_RANGE:-0.9:1.3}" 5 1 "level"
plot "${prefix}_pct_of_copy.svg" "$title: % of measured copy (read + write)" \
  "% of measured copy bandwidth" "0:115" 6 95 "95%"
