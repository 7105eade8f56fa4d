"""all_reduce bandwidth: neuron tensors over the "neuron" backend against CPU tensors over gloo.

    python bench/allreduce.py            # spawns 2 ranks on this machine
    torchrun --nproc-per-node 2 bench/allreduce.py

Both run in one process group ("cpu:gloo,neuron:neuron"), size by size,
interleaved, so the two columns see the same machine state. The neuron
backend carries the bytes in gloo too, on zero-copy views of device memory;
the ratio is the price of being a device backend (target: at most 1.1).
Bus bandwidth is NCCL's convention: 2 (n - 1) / n x bytes / time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

SIZES_MB = [1, 2, 4, 8, 16, 32, 64, 128, 256]


def timed(tensor: torch.Tensor, iters: int, group: dist.ProcessGroup | None = None) -> float:
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor, group=group)
    return (time.perf_counter() - start) / iters


def bench(sizes_mb: list[int], repeats: int, no_check_group: dist.ProcessGroup) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(f"all_reduce (sum, float32), {world} ranks, median of {repeats} rounds; "
              f"bus bandwidth in GB/s")
        print(f"{'size':>8} {'gloo cpu':>10} {'neuron':>10} {'ratio':>7} {'neuron, no check':>17} {'ratio':>7}")
    worst = 0.0
    for mb in sizes_mb:
        n = mb * (1 << 20) // 4
        cpu = torch.ones(n)
        dev = torch.ones(n, device="neuron")
        iters = max(2, min(20, 64 // mb))
        timed(cpu, 1), timed(dev, 1), timed(dev, 1, no_check_group)  # warm-up: connections, pages
        t_cpu, t_dev, t_raw = [], [], []
        for _ in range(repeats):
            t_cpu.append(timed(cpu, iters))
            t_dev.append(timed(dev, iters))
            t_raw.append(timed(dev, iters, no_check_group))
        c, d, r = statistics.median(t_cpu), statistics.median(t_dev), statistics.median(t_raw)
        bus = 2 * (world - 1) / world * n * 4 / 1e9
        worst = max(worst, d / c)
        if rank == 0:
            print(f"{mb:>5} MB {bus / c:>10.2f} {bus / d:>10.2f} {d / c:>7.3f} {bus / r:>17.2f} {r / c:>7.3f}",
                  flush=True)
    if rank == 0:
        print(f"worst ratio (neuron / gloo time, default settings): {worst:.3f}")


def worker(rank: int | None = None, world: int = 2, port: int = 0, sizes: list[int] | None = None,
           repeats: int = 5) -> None:
    if rank is not None:
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(port))
    from torchneuron_ext.distributed import NeuronOptions
    dist.init_process_group("cpu:gloo,neuron:neuron")
    no_check = dist.new_group(backend="neuron", pg_options=NeuronOptions(check_signatures=False))
    bench(sizes or SIZES_MB, repeats, no_check)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description="all_reduce bandwidth, neuron vs gloo")
    parser.add_argument("--sizes", type=int, nargs="*", default=SIZES_MB, help="sizes in MB")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if "RANK" in os.environ:
        worker(sizes=args.sizes, repeats=args.repeats)
        return
    # Spawned ranks: set LOCAL_RANK before torch loads so each rank gets its own core.
    import socket
    import subprocess
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, __file__, "--repeats", str(args.repeats), "--sizes",
                                       *map(str, args.sizes)], env=env))
    sys.exit(max(p.wait() for p in procs))


if __name__ == "__main__":
    main()
