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

    def dtensor_attention() -> None:
        # Heads sharded (tensor parallelism) and batch sharded, with and without a bias that broadcasts
        # over the sharded dimension (whose gradient is then a partial sum); values and gradients
        # against single-process attention on the CPU.
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor
        mesh = init_device_mesh("neuron", (world,))
        g = torch.Generator().manual_seed(7)
        q, k, v = (torch.randn(2, 4, 5, 8, generator=g) for _ in range(3))
        biases = {"none": None, "per_head": torch.randn(2, 4, 5, 5, generator=g),
                  "broadcast": torch.randn(1, 1, 5, 5, generator=g)}
        for dim in (1, 0):
            for name, bias in biases.items():
                for causal in ((False, True) if bias is None else (False,)):
                    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
                    b = bias.clone().requires_grad_() if bias is not None else None
                    ref = F.scaled_dot_product_attention(*leaves, attn_mask=b, is_causal=causal)
                    ref.sum().backward()
                    dq, dk, dv = (distribute_tensor(t.to(DEV), mesh, [Shard(dim)]).requires_grad_() for t in (q, k, v))
                    db = None
                    if bias is not None:
                        placement = Shard(dim) if bias.shape[dim] > 1 else Replicate()
                        db = distribute_tensor(bias.to(DEV), mesh, [placement]).requires_grad_()
                    out = F.scaled_dot_product_attention(dq, dk, dv, attn_mask=db, is_causal=causal)
                    assert out.placements == (Shard(dim),), out.placements
                    out.sum().backward()
                    where = (dim, name, causal)
                    torch.testing.assert_close(out.full_tensor().cpu(), ref.detach(), msg=lambda m: f"{where}: {m}")
                    for leaf, d in zip(leaves + ([b] if b is not None else []), [dq, dk, dv] + ([db] if db is not None else [])):
                        torch.testing.assert_close(d.grad.full_tensor().cpu(), leaf.grad, msg=lambda m: f"{where}: {m}")

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
