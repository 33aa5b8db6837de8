#!/usr/bin/env bash
# Draws the prefill grid's figure from prefill_table.md files that bench/sweep_torch_peers.py
# wrote (one per GPU or tree): ours / PyTorch's best SDPA backend at every uniform shape, ordered
# head_dim, causal before full, then tokens 2k-16k (ragged batches have no PyTorch peer and are
# left out), with the issue's 0.97x line. Needs gnuplot.
#   bench/plot_prefill_grid.sh OUT.svg LABEL=prefill_table.md [LABEL=prefill_table.md ...]
set -euo pipefail
out=$1; shift
mkdir -p "$(dirname "$out")"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
series=(); colours=("#1f77b4" "#d62728" "#2ca02c" "#9467bd"); points=(7 5 9 11); i=0
for spec in "$@"; do
  label=${spec%%=*}; table=${spec#*=}
  # Table columns: d, heads, batch, q x kv, causal, ours us, TFLOP/s, kernel, flash us, cudnn us.
  # Data columns: shape number, head_dim, causal (0 first), tokens, best PyTorch / ours.
  grep '^| [0-9]' "$table" | grep -v ragged | awk -F'|' '{fl = $10 + 0; cu = $11 + 0; best = cu;
      if (fl > 0 && (cu == 0 || fl < cu)) best = fl; split($5, qk, " x ");
      printf "%d %d %d %.4f\n", $2, ($6 ~ /yes/ ? 0 : 1), qk[1], best / $7}' |
    sort -k1,1n -k2,2n -k3,3n | awk '{print NR, $0}' > "$work/$i.dat"
  series+=("\"$work/$i.dat\" using 1:5 with linespoints pt ${points[$i]} ps 0.7 lc rgb \"${colours[$i]}\" title \"$label\"")
  i=$((i + 1))
done
shapes=$(wc -l < "$work/0.dat")
# A tick in the middle of each (head_dim, causal) group, a dashed line between groups.
ticks=$(awk '{k = $2 " " $3; if (!(k in first)) {first[k] = NR; order[++n] = k} last[k] = NR}
  END {for (j = 1; j <= n; j++) {split(order[j], f, " ");
    printf "%s\"d%s %s\" %.1f", (j > 1 ? ", " : ""), f[1], (f[2] == 0 ? "causal" : "full"),
      (first[order[j]] + last[order[j]]) / 2}}' "$work/0.dat")
edges=$(awk 'NR > 1 && ($2 != pd || $3 != pc) {printf "%s ", NR - 0.5} {pd = $2; pc = $3}' "$work/0.dat")
joined=$(printf '%s, ' "${series[@]}"); joined=${joined%, }
gnuplot <<GP
set terminal svg size 900,420 font "sans,11"
set output "$out"
set title "Prefill through gpuprofd: ours / PyTorch's best SDPA backend (2k, 4k, 8k, 16k tokens)"
set ylabel "ours vs best PyTorch (>1: ours faster)"
set yrange [0.5:1.2]
set xrange [0:$((shapes + 1))]
set grid ytics
set key top right
set xtics ($ticks)
do for [x in "$edges"] { set arrow from x, graph 0 to x, graph 1 nohead lc rgb "#bbbbbb" dt 2 }
plot 0.97 with lines lc rgb "black" dt 3 title "0.97x (the target)", $joined
GP
echo "wrote $out"
