"""Row softmax, y = exp(x - max) / sum(exp(x - max)), over rows that need not fill the last tile.

Legacy: nl.max, nl.exp, nl.sum and a division, each masked on the last row tile (the (P, 1)
reductions broadcast back over the free axis). New: the max (negated) from ``tensor_reduce``, then one
Scalar-engine ``activation`` computes exp(x + (-max)) and, in the same instruction, the row sums into
``reduce_res``; a reciprocal and a ``tensor_scalar`` multiply finish it.

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
def softmax_legacy(x):
    rows, d = x.shape
    out = lnl.ndarray((rows, d), dtype=x.dtype, buffer=lnl.shared_hbm)
    i_p, i_f = lnl.mgrid[0:lnl.tile_size.pmax, 0:d]
    for i in lnl.affine_range(math.ceil(rows / lnl.tile_size.pmax)):
        row = i * lnl.tile_size.pmax + i_p
        valid = row < rows
        t = lnl.load(x[row, i_f], mask=valid, dtype=lnl.float32)
        row_max = lnl.max(t, axis=[1], mask=valid)
        e = lnl.exp(lnl.subtract(t, row_max, mask=valid), mask=valid)
        total = lnl.sum(e, axis=[1], mask=valid)
        lnl.store(out[row, i_f], value=lnl.divide(e, total, mask=valid), mask=valid)
    return out


@nki.jit
def softmax_new(x):
    rows, d = x.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((rows, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for r0 in range(0, rows, P):
        n = min(P, rows - r0)
        t = nl.ndarray((P, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:n], src=x[r0:r0 + n])
        neg_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max[0:n], op=nl.maximum, data=t[0:n], axis=1, negate=True)
        e = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=e[0:n], op=nl.exp, data=t[0:n], bias=neg_max[0:n], reduce_op=nl.add,
                               reduce_res=total[0:n])
        inv = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv[0:n], data=total[0:n])
        y = nl.ndarray((P, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[0:n], data=e[0:n], op0=nl.multiply, operand0=inv[0:n])
        nisa.dma_copy(dst=out[r0:r0 + n], src=y[0:n])
    return out


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def main(device: str = "cpu") -> None:
    """Run the kernels on ``device`` tensors and compare with torch on CPU."""
    from _check import check, on_device
    on = on_device(device)
    torch.manual_seed(0)
    x = torch.randn(200, 333) * 4
    check("softmax, legacy, 200x333 (masked)", softmax_legacy(*on(x)), reference(x), atol=1e-6, rtol=1e-5)
    check("softmax, new, 200x333 (sliced)", softmax_new(*on(x)), reference(x), atol=1e-6, rtol=1e-5)
    xb = x.bfloat16()
    check("softmax, legacy, bf16", softmax_legacy(*on(xb)), reference(xb), atol=4e-3, rtol=1e-2)
    check("softmax, new, bf16", softmax_new(*on(xb)), reference(xb), atol=4e-3, rtol=1e-2)


if __name__ == "__main__":
    from _check import device_from_args
    main(device_from_args(__doc__.split("\n")[0]))
