#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention backends on the shapes of attention_benchmark.

Same conventions as the C++ benchmark: GQA 32/8, head_dim 128, bf16; prefill batch 1 causal
4k/8k/16k (and 4k non-causal, and 4k causal at head_dim 256 with 16/8 heads), decode q_len 1
at batch 32/64/128 x KV 4k and batch 1/4/8 x KV 8k/16k/32k. K/V are contiguous [batch,
kv_heads, len, dim] (PyTorch has no paged cache). Timing: CUDA events around each call, queued
behind a spin kernel (launch overhead is not timed), the L2 flushed before each (a read of 2x
its size, as the C++ benchmark's default; --flush=write: a memset, whose dirty lines the timed
call writes back), warm-up excluded, median. FLOPs = 4 * heads * pairs * dim (causal q == kv
counts half); bytes = Q + K + V (once per KV head) + O. A backend that refuses enable_gqa is
retried with K/V expanded to all query heads outside the timed region (the bytes stay the GQA
minimum, so its GB/s is comparable); the table says so.

  python3 torch_attention_peers.py [--quick] [--table PATH] [--flush read|write]
  python3 torch_attention_peers.py --decode-grid --ours ours.csv [--table PATH]
  python3 torch_attention_peers.py --prefill-grid --ours prefill_ours.csv [--table PATH]

--decode-grid: decode (8 KV heads x GQA group, d128, bf16, q_len 1) at every shape of the CSV
that `attention_benchmark --decode-grid --csv=ours.csv` (or bench/sweep_torch_peers.py, from a
daemon sweep) wrote, each backend timed over 10
flushed calls (flushed as the CSV's own rows were), printed beside our tuned kernel: ours /
best PyTorch backend (> 1: ours faster) and ours as % of the copy the C++ benchmark measured.
K/V are made once per (batch, length) and shared by the groups; the expanded retry is skipped
where K/V x group would not fit.

--prefill-grid: every uniform prefill shape of the CSV bench/sweep_torch_peers.py wrote from a
daemon sweep, each backend over 10 flushed calls, beside ours and our cuDNN backend.
"""
import argparse
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

HEADS, KV_HEADS, DIM = 32, 8, 128
BACKENDS = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
            ("efficient", SDPBackend.EFFICIENT_ATTENTION)]


def make_flush(mode, dev):
    """What runs before every timed call: a pass over 2x the L2 (128 MiB covers the H100/H200's)."""
    buf = torch.zeros(2 * 64 * 2**20, dtype=torch.uint8, device=dev)
    if mode == "read":
        return lambda: buf.sum(dtype=torch.int64)  # leaves the L2 holding clean lines
    return buf.zero_  # leaves it full of dirty lines


def time_ms(fn, flush, samples, warmup=3):
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(samples)]
    stops = [torch.cuda.Event(enable_timing=True) for _ in range(samples)]
    for i in range(samples):
        # A spin kernel first (about 1 ms): Python queues the flush and the call behind it, so
        # the call's launch overhead is not on the clock, as the C++ benchmark's blocker does.
        torch.cuda._sleep(2_000_000)
        flush()
        starts[i].record()
        fn()
        stops[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, stops))
    return statistics.median(times)


def run_case(backend, q, k, v, causal, flush, samples):
    def call(kk, vv, gqa):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, kk, vv, is_causal=causal, enable_gqa=gqa)
    try:
        call(k, v, True)
        torch.cuda.synchronize()
        return time_ms(lambda: call(k, v, True), flush, samples), "gqa"
    except RuntimeError:
        pass
    group = q.shape[1] // k.shape[1]
    ke = k.repeat_interleave(group, dim=1)
    ve = v.repeat_interleave(group, dim=1)
    try:
        call(ke, ve, False)
        torch.cuda.synchronize()
        return time_ms(lambda: call(ke, ve, False), flush, samples), "expanded"
    except RuntimeError as e:
        return None, str(e).splitlines()[0][:60]


def run_decode_grid(ours_csv, table_path):
    with open(ours_csv) as f:
        lines = [line.strip().split(",") for line in f if line.strip()]
    our_copy = float(lines[0][1])
    # CSVs written before the flush was a read say nothing: theirs was a memset.
    flush_mode = "write"
    if lines[1][0] == "flush":
        flush_mode = lines[1][1]
        lines = lines[1:]
    header = lines[1]
    ours = []
    # CSVs written before the grid took these as axes were head_dim 128, page 16, 8 KV heads.
    dims, pages, kv_heads_seen = set(), set(), set()
    for fields in lines[2:]:
        row = dict(zip(header, fields))
        dims.add(int(row.get("head_dim") or DIM))
        pages.add(int(row.get("page_size") or 16))
        kv_heads_seen.add(int(row.get("kv_heads") or KV_HEADS))
        # Our cuDNN backend's time, when the CSV came from a daemon sweep that ran it too.
        cudnn_backend = row.get("cudnn_backend_us") or ""
        ours.append((int(row["group"]), int(row["batch"]), int(row["kv"]), float(row["us"]),
                     float(row["pct_copy"]), row["kernel"],
                     float(cudnn_backend) if cudnn_backend else None))
    if len(dims) != 1 or len(pages) != 1 or len(kv_heads_seen) != 1:
        raise SystemExit(f"{ours_csv}: one head_dim, page size and KV head count a table (has "
                         f"head_dim {sorted(dims)}, page size {sorted(pages)}, KV heads "
                         f"{sorted(kv_heads_seen)}); run the grid once for each")
    head_dim, page_size, kv_heads = dims.pop(), pages.pop(), kv_heads_seen.pop()
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    flush = make_flush(flush_mode, dev)
    out = [f"\ntorch {torch.__version__}, {props.name}; ours: copy {our_copy:.0f} GB/s "
           f"(measured with ours); head_dim {head_dim}, {kv_heads} KV heads; PyTorch K/V "
           "contiguous, ours paged "
           f"(page {page_size}); "
           f"L2 flushed by a {flush_mode} before each call\n",
           "| group | batch | kv | ours us | ours % copy | ours kernel | flash us | cudnn us | "
           "efficient us | best PyTorch | ours vs best | our cuDNN backend us |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    shapes = {}
    for row in ours:
        shapes.setdefault((row[1], row[2]), []).append(row)
    for (batch, kv_len), rows in shapes.items():
        k = torch.empty(batch, kv_heads, kv_len, head_dim, dtype=torch.bfloat16,
                        device=dev).uniform_(-1, 1)
        v = torch.empty_like(k).uniform_(-1, 1)
        for group, _, _, our_us, our_pct, kernel, cudnn_backend in rows:
            q = torch.empty(batch, kv_heads * group, 1, head_dim, dtype=torch.bfloat16,
                            device=dev).uniform_(-2, 2)
            times = {}
            for name, backend in BACKENDS:
                if group > 1 and 2 * k.numel() * 2 * group > 24 * 2**30:
                    # Too big to expand: only the native GQA call.
                    try:
                        def call():
                            with sdpa_kernel(backend):
                                return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                        call()
                        torch.cuda.synchronize()
                        times[name] = time_ms(call, flush, 10) * 1e3
                    except RuntimeError:
                        times[name] = None
                    continue
                ms, _ = run_case(backend, q, k, v, False, flush, 10)
                times[name] = None if ms is None else ms * 1e3
            valid = {n: t for n, t in times.items() if t is not None}
            best = min(valid, key=valid.get) if valid else None
            fmt = lambda t: "-" if t is None else f"{t:.1f}"
            ratio = f"{valid[best] / our_us:.2f}x" if best else "-"
            out.append(f"| {group} | {batch} | {kv_len} | {our_us:.1f} | {our_pct:.1f}% | "
                       f"{kernel} | {fmt(times.get('flash'))} | {fmt(times.get('cudnn'))} | "
                       f"{fmt(times.get('efficient'))} | {best or '-'} | {ratio} | "
                       f"{fmt(cudnn_backend)} |")
            del q
        print(f"  done b{batch} kv={kv_len}", flush=True)
        del k, v
        torch.cuda.empty_cache()
    table = "\n".join(out) + "\n"
    print(table)
    if table_path:
        with open(table_path, "w") as f:
            f.write(table)


def run_prefill_grid(ours_csv, table_path):
    """PyTorch's backends at every uniform prefill shape of the CSV bench/sweep_torch_peers.py
    wrote from a daemon sweep, beside ours and our cuDNN backend; ragged rows (PyTorch's SDPA
    has no ragged batch) are listed against our cuDNN backend only."""
    with open(ours_csv) as f:
        lines = [line.rstrip("\n").split(",") for line in f if line.strip()]
    flush_mode = lines[0][1] if lines[0][0] == "flush" else "read"
    header = lines[1]
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    flush = make_flush(flush_mode, dev)
    out = [f"\ntorch {torch.__version__}, {props.name}; PyTorch Q/K/V contiguous [batch, heads, "
           f"len, dim], ours paged (page 16); L2 flushed by a {flush_mode} before each call\n",
           "| d | heads | batch | q x kv | causal | ours us | ours TFLOP/s | ours kernel | flash us "
           "| cudnn us | best PyTorch | ours vs best | our cuDNN backend us | ours vs our cuDNN |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda t: "-" if t is None else f"{t:.1f}"
    for fields in lines[2:]:
        row = dict(zip(header, fields))
        batch, q_len, kv_len = int(row["batch"]), int(row["q_len"]), int(row["kv_len"])
        heads, kv_heads, dim = int(row["qo_heads"]), int(row["kv_heads"]), int(row["head_dim"])
        causal = row["causal"] == "1"
        our_us = float(row["us"])
        cudnn_backend = float(row["cudnn_backend_us"]) if row["cudnn_backend_us"] else None
        times = {}
        if not row["ragged"]:
            q = torch.empty(batch, heads, q_len, dim, dtype=torch.bfloat16,
                            device=dev).uniform_(-2, 2)
            k = torch.empty(batch, kv_heads, kv_len, dim, dtype=torch.bfloat16,
                            device=dev).uniform_(-1, 1)
            v = torch.empty_like(k).uniform_(-1, 1)
            for name, backend in BACKENDS:
                ms, _ = run_case(backend, q, k, v, causal, flush, 10)
                times[name] = None if ms is None else ms * 1e3
            del q, k, v
            torch.cuda.empty_cache()
        valid = {n: t for n, t in times.items() if t is not None}
        best = min(valid, key=valid.get) if valid else None
        shape = f"{q_len} x {kv_len}" if not row["ragged"] else f"ragged {row['ragged']}"
        out.append(
            f"| {dim} | {heads}/{kv_heads} | {batch} | {shape} | {'yes' if causal else 'no'} | "
            f"{our_us:.1f} | {float(row['tflops']):.0f} | {row['kernel']} | "
            f"{fmt(times.get('flash'))} | {fmt(times.get('cudnn'))} | {best or '-'} | "
            f"{f'{valid[best] / our_us:.2f}x' if best else '-'} | {fmt(cudnn_backend)} | "
            f"{f'{cudnn_backend / our_us:.2f}x' if cudnn_backend else '-'} |")
        print(f"  done d{dim} {shape} {'causal' if causal else 'full'}", flush=True)
    table = "\n".join(out) + "\n"
    print(table)
    if table_path:
        with open(table_path, "w") as f:
            f.write(table)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--table", default="")
    parser.add_argument("--decode-grid", action="store_true")
    parser.add_argument("--prefill-grid", action="store_true")
    parser.add_argument("--ours", default="")
    parser.add_argument("--flush", choices=["read", "write"], default="read")
    parser.add_argument("--backends", default="flash,cudnn,efficient",
                        help="comma-separated SDPA backends to time (the full decode grid: "
                        "efficient, never the best there, takes most of the time)")
    args = parser.parse_args()
    chosen = args.backends.split(",")
    unknown = [b for b in chosen if b not in dict(BACKENDS)]
    if unknown:
        parser.error(f"--backends: unknown {unknown}; allowed: flash, cudnn, efficient")
    BACKENDS[:] = [b for b in BACKENDS if b[0] in chosen]
    if args.decode_grid or args.prefill_grid:
        torch.manual_seed(0)
        (run_decode_grid if args.decode_grid else run_prefill_grid)(args.ours, args.table)
        return
    torch.manual_seed(0)
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    flush = make_flush(args.flush, dev)
    # Copy ceiling, as the C++ benchmark measures it: 1 GiB device-to-device, read + write.
    src = torch.empty(2**30, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    copy_ms = time_ms(lambda: dst.copy_(src), flush, 20)
    copy_gbs = 2 * 2**30 / (copy_ms * 1e-3) / 1e9
    del src, dst
    samples = 10 if args.quick else 30
    lines = [f"\ntorch {torch.__version__}, {props.name}, copy {copy_gbs:.0f} GB/s (measured)\n",
             "| backend | kernel | shape | median us | TFLOP/s | GB/s | % copy | note |",
             "|---|---|---|---|---|---|---|---|"]

    # (length, causal, query heads, KV heads, head_dim): the serving shape, then a head_dim 256
    # model's (16/8 heads, as Gemma 2 9B).
    prefill = [(4096, True, HEADS, KV_HEADS, DIM), (8192, True, HEADS, KV_HEADS, DIM),
               (16384, True, HEADS, KV_HEADS, DIM), (4096, False, HEADS, KV_HEADS, DIM),
               (4096, True, 16, 8, 256)]
    decode = [(32, 4096), (64, 4096), (128, 4096), (1, 8192), (4, 8192), (8, 8192),
              (1, 16384), (4, 16384), (8, 16384), (1, 32768), (4, 32768), (8, 32768)]
    if args.quick:
        prefill, decode = [prefill[0], prefill[-1]], [(32, 4096), (1, 32768)]
    cases = [("prefill", 1, n, n, c, h, kvh, d) for n, c, h, kvh, d in prefill] + \
            [("decode", b, 1, kv, False, HEADS, KV_HEADS, DIM) for b, kv in decode]
    for kind, batch, q_len, kv_len, causal, heads, kv_heads, dim in cases:
        q = torch.empty(batch, heads, q_len, dim, dtype=torch.bfloat16, device=dev).uniform_(-2, 2)
        k = torch.empty(batch, kv_heads, kv_len, dim, dtype=torch.bfloat16,
                        device=dev).uniform_(-1, 1)
        v = torch.empty_like(k).uniform_(-1, 1)
        pairs = batch * q_len * kv_len / (2 if causal and q_len == kv_len else 1)
        flops = 4 * heads * dim * pairs
        bytes_ = 2 * (2 * batch * heads * q_len * dim + 2 * batch * kv_heads * kv_len * dim)
        heads_note = "" if dim == DIM else f" d{dim} {heads}/{kv_heads}"
        shape = (f"b{batch} q=kv={kv_len} {'causal' if causal else 'full'}{heads_note}"
                 if kind == "prefill" else f"b{batch} kv={kv_len}")
        for name, backend in BACKENDS:
            ms, note = run_case(backend, q, k, v, causal, flush,
                                samples if kind == "prefill" else 2 * samples)
            if ms is None:
                lines.append(f"| {name} | {kind} | {shape} | - | - | - | - | {note} |")
                continue
            s = ms * 1e-3
            lines.append(f"| {name} | {kind} | {shape} | {ms * 1e3:.1f} | {flops / s / 1e12:.1f} | "
                         f"{bytes_ / s / 1e9:.0f} | {100 * bytes_ / s / 1e9 / copy_gbs:.1f}% | "
                         f"{note} |")
        print(f"  done {kind} {shape}", flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    table = "\n".join(lines) + "\n"
    print(table)
    if args.table:
        with open(args.table, "w") as f:
            f.write(table)


if __name__ == "__main__":
    main()
