#!/usr/bin/env python3
"""fdatasync latency of the disk holding DIR, as the store's WAL sees it.

Writes WRITE_BYTES (default 8 KiB, about one group commit's frames) and fdatasyncs, RATE times a
second (default 100, the group commits of a paced 500/s run) for SECONDS, in two modes: "reuse"
rewrites a preallocated file from its start again and again (a WAL that SQLite restarts after a
checkpoint: no size change, so ext4 needs no journal commit for the metadata), "append" grows
the file (a WAL truncated by journal_size_limit or a checkpoint in TRUNCATE mode, then grown
again). Prints p50 / p99 / max in ms for each.
Usage: tests/load/fsync_latency.py [DIR=/tmp] [SECONDS=10] [RATE=100] [WRITE_BYTES=8192]
"""
import os
import sys
import tempfile
import time


def run(directory, seconds, rate, write_bytes, mode):
    block = os.urandom(write_bytes)
    span = 1024 * 1024
    fd, path = tempfile.mkstemp(dir=directory, prefix="fsync_latency.")
    try:
        if mode == "reuse":
            os.write(fd, b"\0" * span)
            os.fsync(fd)
        latencies = []
        offset = 0
        start = time.monotonic()
        next_due = start
        while time.monotonic() - start < seconds:
            if mode == "reuse" and offset + write_bytes > span:
                offset = 0
            os.pwrite(fd, block, offset)
            offset += write_bytes
            before = time.monotonic()
            os.fdatasync(fd)
            latencies.append(time.monotonic() - before)
            next_due += 1.0 / rate
            pause = next_due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        latencies.sort()
        pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000
        print(f"{mode:6s} {len(latencies)} fdatasyncs: p50 {pick(0.5):.1f} / p99 {pick(0.99):.1f}"
              f" / max {latencies[-1] * 1000:.1f} ms")
    finally:
        os.close(fd)
        os.unlink(path)


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 10
    rate = float(sys.argv[3]) if len(sys.argv) > 3 else 100
    write_bytes = int(sys.argv[4]) if len(sys.argv) > 4 else 8192
    print(f"load average: {open('/proc/loadavg').read().split()[:3]}")
    for mode in ("reuse", "append"):
        run(directory, seconds, rate, write_bytes, mode)


if __name__ == "__main__":
    main()
