"""all_reduce bandwidth: neuron tensors over the "neuron" backend against CPU tensors over gloo.

    python bench/allreduce.py            # spawns 2 ranks on this machine
    torchrun --nproc-per-node 2 bench/allreduce.py

Both run in one process group ("cpu:gloo,neuron:neuron"), size by size,
one call at a time in rotating order, so the columns see the same machine
state; "no check" is a second group without the cross-rank agreement check. The neuron
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


def one(tensor: torch.Tensor, group: dist.ProcessGroup | None = None) -> float:
    dist.barrier()
    start = time.perf_counter()
    dist.all_reduce(tensor, group=group)
    return time.perf_counter() - start


def bench(sizes_mb: list[int], rounds: int, no_check_group: dist.ProcessGroup) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(f"all_reduce (sum, float32), {world} ranks; bus bandwidth in GB/s from the best of the rounds "
              f"(the machine's noise only ever adds time), ratio = neuron time / gloo time")
        print(f"{'size':>8} {'rounds':>6} {'gloo cpu':>9} {'neuron':>9} {'ratio':>6} {'median':>7} "
              f"{'no check':>9} {'ratio':>6}")
    worst = 0.0
    for mb in sizes_mb:
        n = mb * (1 << 20) // 4
        cpu = torch.ones(n)
        dev = torch.ones(n, device="neuron")
        variants = [(cpu, None), (dev, None), (dev, no_check_group)]
        for t, g in variants:  # warm-up: connections, first-touch of pages
            one(t, g)
        samples: list[list[float]] = [[], [], []]
        count = max(4, min(rounds, (rounds * 16) // mb))
        for i in range(count):
            for k in range(3):  # rotate the order so no variant always runs first
                j = (i + k) % 3
                samples[j].append(one(*variants[j]))
        best = [min(s) for s in samples]
        med = [statistics.median(s) for s in samples]
        bus = 2 * (world - 1) / world * n * 4 / 1e9
        worst = max(worst, best[1] / best[0])
        if rank == 0:
            print(f"{mb:>5} MB {count:>6} {bus / best[0]:>9.2f} {bus / best[1]:>9.2f} {best[1] / best[0]:>6.3f} "
                  f"{med[1] / med[0]:>7.3f} {bus / best[2]:>9.2f} {best[2] / best[0]:>6.3f}", flush=True)
    if rank == 0:
        print(f"worst ratio (best times, default settings): {worst:.3f}")


def worker(rank: int | None = None, world: int = 2, port: int = 0, sizes: list[int] | None = None,
           rounds: int = 20) -> None:
    if rank is not None:
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(port))
    from torchneuron_ext.distributed import NeuronOptions
    dist.init_process_group("cpu:gloo,neuron:neuron")
    no_check = dist.new_group(backend="neuron", pg_options=NeuronOptions(check_signatures=False))
    bench(sizes or SIZES_MB, rounds, no_check)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description="all_reduce bandwidth, neuron vs gloo")
    parser.add_argument("--sizes", type=int, nargs="*", default=SIZES_MB, help="sizes in MB")
    parser.add_argument("--rounds", type=int, default=20, help="rounds at 1 MB (fewer for large sizes, at least 4)")
    args = parser.parse_args()
    if "RANK" in os.environ:
        worker(sizes=args.sizes, rounds=args.rounds)
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
        procs.append(subprocess.Popen([sys.executable, __file__, "--rounds", str(args.rounds), "--sizes",
                                       *map(str, args.sizes)], env=env))
    sys.exit(max(p.wait() for p in procs))


if __name__ == "__main__":
    main()
