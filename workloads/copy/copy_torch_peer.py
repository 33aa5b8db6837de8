#!/usr/bin/env python3
"""The copy workload's routes done by PyTorch on the same GPU, for a side-by-side check of
`gpuprof submit copy` (docs/benchmarks/RESULTS.md, "Copy").

  copy_torch_peer.py [--bytes 268435456] [--samples 50]

Same byte accounting as the workload: a device copy counts read + written, a host copy the
bytes that crossed PCIe (both directions when both run at once). Device and pinned copies are
timed with CUDA events around one copy_ (non_blocking), the median of the samples; pageable
copies, which return only when done, on the host clock.
"""
import argparse
import statistics
import time

import torch


def time_events(copies, samples, warmup=5):
    """Median seconds of `copies` (one (dst, src, stream) per leg) run at once on their streams."""
    def run():
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        main = torch.cuda.current_stream()
        start.record(main)
        for dst, src, stream in copies:
            stream.wait_stream(main)
            with torch.cuda.stream(stream):
                dst.copy_(src, non_blocking=True)
        for _, _, stream in copies:
            main.wait_stream(stream)
        stop.record(main)
        stop.synchronize()
        return start.elapsed_time(stop) / 1e3
    for _ in range(warmup):
        run()
    return statistics.median(run() for _ in range(samples))


def time_host(dst, src, samples, warmup=5):
    def run():
        begin = time.perf_counter()
        dst.copy_(src)
        torch.cuda.synchronize()
        return time.perf_counter() - begin
    for _ in range(warmup):
        run()
    return statistics.median(run() for _ in range(samples))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bytes", type=int, default=256 << 20)
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args()
    n = args.bytes
    dev = [torch.empty(n, dtype=torch.uint8, device="cuda") for _ in range(2)]
    pinned = [torch.empty(n, dtype=torch.uint8, pin_memory=True) for _ in range(2)]
    pageable = [torch.empty(n, dtype=torch.uint8).fill_(1) for _ in range(2)]
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    rows = [
        ("device to device", 2 * n, time_events([(dev[1], dev[0], s1)], args.samples)),
        ("host (pinned) -> GPU", n, time_events([(dev[1], pinned[0], s1)], args.samples)),
        ("GPU -> host (pinned)", n, time_events([(pinned[1], dev[0], s1)], args.samples)),
        ("host (pinned) <-> GPU", 2 * n,
         time_events([(dev[1], pinned[0], s1), (pinned[1], dev[0], s2)], args.samples)),
        ("host (pageable) -> GPU", n, time_host(dev[1], pageable[0], args.samples)),
        ("GPU -> host (pageable)", n, time_host(pageable[1], dev[0], args.samples)),
    ]
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}, {n} bytes")
    for route, moved, seconds in rows:
        print(f"torch  {route:26s} {moved / seconds / 1e9:9.1f} GB/s  (median {seconds * 1e6:.1f} us)")


if __name__ == "__main__":
    main()
