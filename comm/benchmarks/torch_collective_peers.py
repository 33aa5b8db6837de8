"""torch.distributed (NCCL backend) on the sizes collective_benchmark sweeps: the PyTorch peer.

One process per GPU (mp.spawn). Time per op = CUDA-event time of `iters` back-to-back calls
divided by iters, max over ranks, so Python's launch cost is included, as a PyTorch user sees
it. algbw/busbw follow nccl-tests (S = the total array; busbw factors all_reduce 2(n-1)/n,
all_gather, reduce_scatter, all_to_all (n-1)/n, broadcast 1).

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
        python3 comm/benchmarks/torch_collective_peers.py --max-bytes 1073741824
"""
import argparse
import os

# NVLink multicast stays off on shared machines, also in the spawned ranks.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
SPLITS = {"all_gather", "reduce_scatter", "all_to_all"}


def bus_factor(op, n):
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op == "broadcast":
        return 1.0
    return (n - 1) / n


def sweep_counts(min_bytes, max_bytes, factor, element_bytes, op, n):
    """Element counts as comm/bus_bandwidth.h rounds them (whole elements, multiple of n)."""
    granule = n if op in SPLITS else 1
    counts, size = [], float(min_bytes)
    while size <= max_bytes:
        nbytes = int(size)
        count = max(nbytes // element_bytes // granule * granule, granule)
        if not counts or count > counts[-1]:
            counts.append(count)
        size = max(size * factor, nbytes + 1)
    return counts


def iterations(nbytes, fixed):
    if fixed:
        return fixed
    if nbytes <= 1 << 20:
        return 200
    if nbytes <= 64 << 20:
        return 50
    return 20


def run_rank(rank, n, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=n, device_id=torch.device("cuda", rank))
    dtype = DTYPES[args.dtype]
    esize = torch.tensor([], dtype=dtype).element_size()
    results = []
    for op in args.ops.split(","):
        for count in sweep_counts(args.min_bytes, args.max_bytes, args.step_factor, esize, op, n):
            chunk = count // n
            if op == "all_reduce" or op == "broadcast":
                send = torch.zeros(count, dtype=dtype, device="cuda")
                fn = (lambda: dist.all_reduce(send)) if op == "all_reduce" else \
                     (lambda: dist.broadcast(send, src=0))
            elif op == "all_gather":
                send = torch.zeros(chunk, dtype=dtype, device="cuda")
                recv = torch.empty(count, dtype=dtype, device="cuda")
                fn = lambda: dist.all_gather_into_tensor(recv, send)  # noqa: E731
            elif op == "reduce_scatter":
                send = torch.zeros(count, dtype=dtype, device="cuda")
                recv = torch.empty(chunk, dtype=dtype, device="cuda")
                fn = lambda: dist.reduce_scatter_tensor(recv, send)  # noqa: E731
            else:
                send = torch.zeros(count, dtype=dtype, device="cuda")
                recv = torch.empty(count, dtype=dtype, device="cuda")
                fn = lambda: dist.all_to_all_single(recv, send)  # noqa: E731
            nbytes = count * esize
            iters = iterations(nbytes, args.iters)
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
            dist.barrier()
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            stop.record()
            torch.cuda.synchronize()
            seconds = torch.tensor([start.elapsed_time(stop) * 1e-3 / iters], device="cuda")
            dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
            results.append((op, nbytes, count, seconds.item()))
            del send
    if rank == 0:
        print(f"# torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, "
              f"{n} ranks, {args.dtype}; time: us per op (CUDA events, max over ranks, Python "
              f"launch included); algbw, busbw: GB/s")
        print(f"{'op':>15} {'size(B)':>12} {'count':>12} {'time':>10} {'algbw':>8} {'busbw':>8}")
        for op, nbytes, count, seconds in results:
            algbw = nbytes / seconds / 1e9
            print(f"{op:>15} {nbytes:12d} {count:12d} {seconds * 1e6:10.2f} {algbw:8.2f} "
                  f"{algbw * bus_factor(op, n):8.2f}")
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-bytes", type=int, default=8)
    parser.add_argument("--max-bytes", type=int, default=1 << 30)
    parser.add_argument("--step-factor", type=float, default=2.0)
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--dtype", default="fp32", choices=sorted(DTYPES))
    parser.add_argument("--iters", type=int, default=0)
    parser.add_argument("--ranks", type=int, default=0)
    parser.add_argument("--port", type=int, default=29517)
    args = parser.parse_args()
    n = args.ranks or torch.cuda.device_count()
    mp.spawn(run_rank, args=(n, args, args.port), nprocs=n, join=True)


if __name__ == "__main__":
    main()
