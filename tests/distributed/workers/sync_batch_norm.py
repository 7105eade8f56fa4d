"""Worker: nn.SyncBatchNorm under DDP on neuron, each rank holding part of the batch, against
single-process BatchNorm over the whole batch on the CPU: outputs, input gradients, weight and bias
gradients, running statistics, parameters after SGD steps; uneven per-rank batches, channels_last,
BatchNorm1d, eval mode."""
from __future__ import annotations

import copy
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from tests.distributed.launcher import Checks, write_result

DEV = torch.device("neuron")
# float64 on both sides: the combination of per-rank statistics then agrees with one pass over the whole
# batch to rounding, so any difference in the math shows (in float32, cancellation in the input gradient
# and in the bias gradient of a layer before BatchNorm, which is ~0, is 1e-4 relative).
TOL = dict(rtol=1e-9, atol=1e-10)


def conv_bn() -> nn.Module:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4, momentum=0.3), nn.ReLU(), nn.Conv2d(4, 2, 1))
    with torch.no_grad():  # non-trivial affine parameters
        m[1].weight.uniform_(0.5, 1.5)
        m[1].bias.uniform_(-0.5, 0.5)
    return m


def main() -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("neuron")
    c = Checks()

    def train_and_compare(make, shape, sizes, steps=3, memory_format=torch.contiguous_format):
        """`sizes[r]` samples on rank r; the reference sees all of them in one process."""
        reference = make().double()
        ddp = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(copy.deepcopy(reference)).to(DEV))
        assert any(isinstance(m, nn.SyncBatchNorm) for m in ddp.modules())
        ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        start = sum(sizes[:rank])
        for step in range(steps):
            g = torch.Generator().manual_seed(100 + step)
            x = (torch.randn(sum(sizes), *shape, generator=g, dtype=torch.float64) * 2 + 0.5).contiguous(
                memory_format=memory_format)
            x_ref = x.clone().requires_grad_()
            out_ref = reference(x_ref)
            (out_ref.square().sum() / world).backward()  # each rank's loss is 1/world of it: DDP averages
            x_local = x[start:start + sizes[rank]].to(DEV).requires_grad_()
            out = ddp(x_local)
            torch.testing.assert_close(out.cpu(), out_ref[start:start + sizes[rank]].detach(), **TOL)
            # the local loss: this rank's part of the global sum, scaled so DDP's average is the global gradient
            (out.square().sum() / world).backward()
            torch.testing.assert_close(x_local.grad.cpu(), x_ref.grad[start:start + sizes[rank]], **TOL)
            for (name, p), p_ref in zip(ddp.module.named_parameters(), reference.parameters()):
                # DDP's average of the ranks' gradients is 1/world of the whole batch's
                torch.testing.assert_close(p.grad.cpu() * world, p_ref.grad, **TOL, msg=f"{name} step {step}")
            for p in reference.parameters():
                p.grad.mul_(1.0 / world)  # the same step size on both sides
            ref_opt.step()
            opt.step()
            ref_opt.zero_grad()
            opt.zero_grad()
            for b, b_ref in zip(ddp.module.buffers(), reference.buffers()):
                torch.testing.assert_close(b.cpu(), b_ref, **TOL)
        for p, p_ref in zip(ddp.module.parameters(), reference.parameters()):
            torch.testing.assert_close(p.detach().cpu(), p_ref.detach(), **TOL)
        # eval mode normalizes with the running statistics, which agree
        ddp.eval()
        reference.eval()
        x = torch.randn(2, *shape, dtype=torch.float64)
        with torch.no_grad():
            torch.testing.assert_close(ddp(x.to(DEV)).cpu(), reference(x), **TOL)

    def sync_batch_norm_2d_matches_single_process() -> None:
        train_and_compare(conv_bn, (3, 5, 5), [4] * world)

    def sync_batch_norm_uneven_batches() -> None:
        train_and_compare(conv_bn, (3, 4, 4), [3 + 2 * r for r in range(world)])

    def sync_batch_norm_channels_last() -> None:
        train_and_compare(conv_bn, (3, 4, 4), [2] * world, memory_format=torch.channels_last)

    def sync_batch_norm_1d() -> None:
        def make() -> nn.Module:
            torch.manual_seed(1)
            return nn.Sequential(nn.Linear(6, 5), nn.BatchNorm1d(5), nn.Tanh(), nn.Linear(5, 1))
        train_and_compare(make, (6,), [5] * world)

    def sync_batch_norm_ops_ran_on_neuron() -> None:
        import torchneuron_ext
        executed = torchneuron_ext.get_executed_ops()
        for op in ("aten::batch_norm_stats", "aten::batch_norm_gather_stats_with_counts", "aten::batch_norm_elemt",
                   "aten::batch_norm_backward_reduce", "aten::batch_norm_backward_elemt"):
            assert op in executed, op

    for name, fn in list(locals().items()):
        if callable(fn) and name.startswith("sync_batch_norm"):
            c.run(name, fn)
    dist.destroy_process_group()
    write_result(c.results)


if __name__ == "__main__":
    main()
