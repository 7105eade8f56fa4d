"""Worker: FSDP2, DTensor tensor parallelism and compiled functional collectives on neuron."""
from __future__ import annotations

import os

import torch
import torch.distributed as dist
import torch.nn.functional as F

from tests.distributed.launcher import Checks, write_result

DEV = torch.device("neuron")


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))


def batch(step: int, n: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(step)
    return torch.randn(n, 8, generator=g), torch.randn(n, 8, generator=g)


def reference_losses(steps: int) -> list[float]:
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = []
    for step in range(steps):
        x, y = batch(step)
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def main() -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("neuron")
    c = Checks()
    steps = 3
    ref = reference_losses(steps)

    def fsdp2_matches_single_process() -> None:
        from torch.distributed.fsdp import fully_shard
        model = mlp().to(DEV)
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer)
        fully_shard(model)
        assert type(model[0].weight).__name__ == "DTensor" and model[0].weight.to_local().device.type == "neuron"
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        shard = 8 // world
        for step in range(steps):
            x, y = batch(step)
            x, y = x[rank * shard:(rank + 1) * shard].to(DEV), y[rank * shard:(rank + 1) * shard].to(DEV)
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            global_loss = loss.detach().clone()
            dist.all_reduce(global_loss, op=dist.ReduceOp.AVG)
            assert abs(global_loss.item() - ref[step]) < 1e-5, (step, global_loss.item(), ref[step])

    def dtensor_tensor_parallel_linear() -> None:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
        mesh = init_device_mesh("neuron", (world,))
        model = parallelize_module(mlp().to(DEV), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
        assert model[0].weight.to_local().shape == (16 // world, 8)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(steps):
            x, y = batch(step)  # tensor parallel: every rank sees the whole batch
            opt.zero_grad()
            loss = F.mse_loss(model(x.to(DEV)), y.to(DEV))
            loss.backward()
            opt.step()
            assert loss.device.type == "neuron"
            assert abs(loss.item() - ref[step]) < 1e-5, (step, loss.item(), ref[step])

    def compiled_functional_collectives() -> None:
        import torch.distributed._functional_collectives as funcol

        def step(x: torch.Tensor) -> torch.Tensor:
            y = funcol.all_reduce(x * 2, "sum", dist.group.WORLD)
            z = funcol.all_gather_tensor(y + 1, 0, dist.group.WORLD)
            return funcol.reduce_scatter_tensor(z, "sum", 0, dist.group.WORLD) - 1

        compiled = torch.compile(step, backend="neuron", fullgraph=True)
        x = torch.arange(4.0, device=DEV) + rank
        out = compiled(x)
        assert out.device.type == "neuron"
        torch.testing.assert_close(out.cpu(), step(x).cpu())
        total = sum(torch.arange(4.0) + r for r in range(world)) * 2
        torch.testing.assert_close(out.cpu(), (total + 1) * world - 1)

    def ddp_bucketed_gradients() -> None:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(mlp().to(DEV), bucket_cap_mb=0.0001)  # many buckets: one allreduce each
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        shard = 8 // world
        for step in range(steps):
            x, y = batch(step)
            opt.zero_grad()
            loss = F.mse_loss(model(x[rank * shard:(rank + 1) * shard].to(DEV)),
                              y[rank * shard:(rank + 1) * shard].to(DEV))
            loss.backward()
            opt.step()
            g = loss.detach().clone()
            dist.all_reduce(g, op=dist.ReduceOp.AVG)
            assert abs(g.item() - ref[step]) < 1e-5, (step, g.item(), ref[step])

    for name, fn in list(locals().items()):
        if callable(fn) and name not in ("c", "main") and getattr(fn, "__code__", None) and fn.__code__.co_argcount == 0:
            c.run(name, fn)
    dist.destroy_process_group()
    write_result(c.results)


if __name__ == "__main__":
    main()
