"""RMSNorm, y = x / sqrt(mean(x^2, -1) + eps) * g, over rows that need not fill the last 128-row tile.

Legacy dialect: index with ``nl.arange`` and mask the last tile (``mask=(i * 128 + i_p < rows)``); the
masked-out rows of its load and store lie outside the tensor, which masks allow. New dialect: no masks;
slice the last tile short (``rows - r0`` partitions) and broadcast the weight over the partitions with
a stride-0 access pattern (``g.ap([[0, 128], [1, d]])``). The new kernel squares and sums in one
Scalar-engine instruction (``activation_reduce``).

Run as a script (add ``--device neuron`` for neuron tensors) to check both against torch.
"""
from __future__ import annotations

import math

import torch

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
import torchneuron_ext.nki.legacy as lnki
import torchneuron_ext.nki.legacy.language as lnl


@lnki.jit
def rmsnorm_legacy(x, g, eps=1e-6):
    rows, d = x.shape
    assert g.shape == (d,), f"the weight must have shape ({d},) for x of shape {x.shape}, got {g.shape}"
    out = lnl.ndarray((rows, d), dtype=x.dtype, buffer=lnl.shared_hbm)
    i_p = lnl.arange(lnl.tile_size.pmax)[:, None]
    i_f = lnl.arange(d)[None, :]
    g_row = lnl.load(g.reshape((1, d))[lnl.arange(1)[:, None], i_f])
    g_tile = g_row.broadcast_to((lnl.tile_size.pmax, d))
    for i in lnl.affine_range(math.ceil(rows / lnl.tile_size.pmax)):
        row = i * lnl.tile_size.pmax + i_p
        x_tile = lnl.load(x[row, i_f], mask=(row < rows))
        mean_sq = lnl.mean(lnl.square(x_tile, mask=(row < rows)), axis=[1], mask=(row < rows))  # (128, 1)
        inv_rms = lnl.rsqrt(mean_sq + eps, mask=(row < rows))
        y = lnl.multiply(lnl.multiply(x_tile, inv_rms, mask=(row < rows)), g_tile, mask=(row < rows))
        lnl.store(out[row, i_f], value=y, mask=(row < rows))
    return out


@nki.jit
def rmsnorm_new(x, g, eps=1e-6):
    rows, d = x.shape
    assert g.shape == (d,), f"the weight must have shape ({d},) for x of shape {x.shape}, got {g.shape}"
    P = nl.tile_size.pmax
    out = nl.ndarray((rows, d), dtype=x.dtype, buffer=nl.shared_hbm)
    g_tile = nl.ndarray((P, d), dtype=g.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g_tile, src=g.ap([[0, P], [1, d]], offset=0))
    for r0 in range(0, rows, P):
        n = min(P, rows - r0)
        x_tile = nl.ndarray((P, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_tile[0:n], src=x[r0:r0 + n])
        squares = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        sum_sq = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=squares[0:n], op=nl.square, data=x_tile[0:n], reduce_op=nl.add,
                               reduce_res=sum_sq[0:n])
        inv_rms = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=inv_rms[0:n], data=sum_sq[0:n], op0=nl.multiply, operand0=1.0 / d,
                           op1=nl.add, operand1=eps)
        nisa.activation(dst=inv_rms[0:n], op=nl.rsqrt, data=inv_rms[0:n])
        y = nl.ndarray((P, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[0:n], data=x_tile[0:n], op0=nl.multiply, operand0=inv_rms[0:n])
        nisa.tensor_tensor(dst=y[0:n], data1=y[0:n], data2=g_tile[0:n], op=nl.multiply)
        nisa.dma_copy(dst=out[r0:r0 + n], src=y[0:n])
    return out


def reference(x: torch.Tensor, g: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * g.float()).to(x.dtype)


def main(device: str = "cpu") -> None:
    """Run the kernels on ``device`` tensors and compare with torch on CPU."""
    from _check import check, on_device
    on = on_device(device)
    torch.manual_seed(0)
    x, g = torch.randn(250, 384), torch.rand(384) + 0.5
    check("rmsnorm, legacy, 250 rows (masked)", rmsnorm_legacy(*on(x, g)), reference(x, g))
    check("rmsnorm, new, 250 rows (sliced)", rmsnorm_new(*on(x, g)), reference(x, g))
    xb, gb = x.bfloat16(), g.bfloat16()
    check("rmsnorm, legacy, bf16", rmsnorm_legacy(*on(xb, gb)), reference(xb, gb), atol=2e-2, rtol=1e-2)
    check("rmsnorm, new, bf16", rmsnorm_new(*on(xb, gb)), reference(xb, gb), atol=2e-2, rtol=1e-2)


if __name__ == "__main__":
    from _check import device_from_args
    main(device_from_args(__doc__.split("\n")[0]))
