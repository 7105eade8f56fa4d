"""Data-parallel training on neuron cores with DistributedDataParallel.

    torchrun --nproc-per-node 2 examples/ddp_train.py

Each rank gets its own NeuronCore (torchrun's LOCAL_RANK picks it) and half of
every global batch; DDP averages the gradients over the "neuron" backend. At
the end rank 0 trains the same model in one process on the whole global batch
and prints both loss curves: they match, which is what data parallelism
promises.
"""
from __future__ import annotations

import argparse
import json
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

GLOBAL_BATCH = 32
FEATURES, HIDDEN, CLASSES = 16, 64, 4


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, HIDDEN),
                               torch.nn.ReLU(), torch.nn.Linear(HIDDEN, CLASSES))


TEACHER = torch.randn(FEATURES, CLASSES, generator=torch.Generator().manual_seed(7))


def global_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Step `step`'s global batch: random inputs, labels from a fixed linear teacher (learnable)."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(GLOBAL_BATCH, FEATURES, generator=g)
    return x, (x @ TEACHER).argmax(1)


def train_distributed(steps: int, lr: float) -> list[float]:
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("neuron")  # this rank's own core: neuron:0 of the cores it sees
    model = DDP(make_model().to(device))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    shard = GLOBAL_BATCH // world
    losses = []
    for step in range(steps):
        x, y = global_batch(step)
        x, y = x[rank * shard:(rank + 1) * shard].to(device), y[rank * shard:(rank + 1) * shard].to(device)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()  # DDP all-reduces (averages) the gradients here
        opt.step()
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss, op=dist.ReduceOp.AVG)  # the loss over the whole global batch
        losses.append(global_loss.item())
    return losses


def train_single_process(steps: int, lr: float) -> list[float]:
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    losses = []
    for step in range(steps):
        x, y = global_batch(step)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.2)
    parser.add_argument("--json", help="rank 0 writes both loss curves here")
    args = parser.parse_args()
    if "RANK" not in os.environ:
        raise SystemExit("run me with torchrun, e.g. `torchrun --nproc-per-node 2 examples/ddp_train.py`")
    dist.init_process_group(backend="neuron")
    losses = train_distributed(args.steps, args.lr)
    rank, world = dist.get_rank(), dist.get_world_size()
    core = torch.neuron.get_device_properties(0)
    print(f"rank {rank}/{world}: NEURON_RT_VISIBLE_CORES={os.environ.get('NEURON_RT_VISIBLE_CORES')} "
          f"device={core.name}", flush=True)
    dist.barrier()
    if rank == 0:
        reference = train_single_process(args.steps, args.lr)
        print(f"{'step':>4} {'DDP x' + str(world):>12} {'1 process':>12}")
        for step, (a, b) in enumerate(zip(losses, reference)):
            print(f"{step:>4} {a:>12.6f} {b:>12.6f}")
        diff = max(abs(a - b) for a, b in zip(losses, reference))
        print(f"max |loss difference| = {diff:.2e}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"ddp": losses, "single": reference, "world_size": world}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
