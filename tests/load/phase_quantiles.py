#!/usr/bin/env python3
"""Per-phase latency from gpuprofd's /metrics (Prometheus text on stdin): for each series of
gpuprof_submit_phase_seconds and gpuprof_store_commit_phase_seconds, the count, the mean and
the p50 / p99 as the upper bound of the bucket that holds them; the group commit's mean batch.
Usage: curl -s 127.0.0.1:PORT/metrics | tests/load/phase_quantiles.py
"""
import collections
import re
import sys

LINE = re.compile(r'^(gpuprof_(?:submit|store_commit)_phase_seconds|gpuprof_store_commit_batch_writes)'
                  r'_(bucket|sum|count)\{?([^}]*)\}? (\S+)$')


def main():
    series = collections.defaultdict(lambda: {"buckets": [], "sum": 0.0, "count": 0})
    for line in sys.stdin:
        match = LINE.match(line.strip())
        if not match:
            continue
        family, kind, labels, value = match.groups()
        label = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        key = (family, label.get("phase", ""))
        if kind == "bucket":
            series[key]["buckets"].append((float(label["le"]), float(value)))
        elif kind == "sum":
            series[key]["sum"] = float(value)
        else:
            series[key]["count"] = int(float(value))
    for (family, phase), data in sorted(series.items()):
        count = data["count"]
        if count == 0:
            continue

        def quantile(q):
            for bound, cumulative in sorted(data["buckets"]):
                if cumulative >= q * count:
                    return bound
            return float("inf")

        if family.endswith("_seconds"):
            print(f"{family}{{phase={phase}}}: {count} observed, mean {data['sum'] / count * 1000:.2f}"
                  f" ms, p50 <= {quantile(0.5) * 1000:g} ms, p99 <= {quantile(0.99) * 1000:g} ms")
        else:
            print(f"{family}: {count} batches, mean {data['sum'] / count:.1f} writes, "
                  f"p99 <= {quantile(0.99):g}")


if __name__ == "__main__":
    main()
