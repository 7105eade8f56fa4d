"""SPMD vector add: every instance of a launch grid adds its own tiles into one shared output.

Legacy dialect: ``add_kernel_legacy[ceil(rows / 128), ceil(cols / tile_cols)](a, b)`` runs a 2-D grid;
instance (i, j) uses ``nl.program_id`` to pick its 128-row by tile_cols-column tile (masked where it
overhangs the tensor), and all instances write into the same ``shared_hbm`` output they each
"allocate". New dialect: ``add_kernel_new[2](a, b)`` runs on two logical NeuronCores (LNC2); each
takes half of the rows and loops over its tiles.

Run as a script (add ``--device neuron`` for neuron tensors) to check both against torch.
"""
from __future__ import annotations

import math
from typing import Any

import torch

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
import torchneuron_ext.nki.legacy as lnki
import torchneuron_ext.nki.legacy.language as lnl


@lnki.jit
def add_kernel_legacy(a, b, tile_cols=512):
    """c = a + b over a grid of (rows / 128, ceil(cols / tile_cols)) instances; cols may be ragged."""
    c = lnl.ndarray(a.shape, dtype=a.dtype, buffer=lnl.shared_hbm)
    rows, cols = a.shape
    i_p = lnl.program_id(0) * lnl.tile_size.pmax + lnl.arange(lnl.tile_size.pmax)[:, None]
    i_f = lnl.program_id(1) * tile_cols + lnl.arange(tile_cols)[None, :]
    inside = (i_p < rows) & (i_f < cols)
    a_tile = lnl.load(a[i_p, i_f], mask=inside)
    b_tile = lnl.load(b[i_p, i_f], mask=inside)
    lnl.store(c[i_p, i_f], value=lnl.add(a_tile, b_tile, mask=inside), mask=inside)
    return c


def add_legacy(a: Any, b: Any, tile_cols: int = 512) -> Any:
    """Launch the legacy kernel on the grid that covers ``a``."""
    grid = (math.ceil(a.shape[0] / 128), math.ceil(a.shape[1] / tile_cols))
    return add_kernel_legacy[grid](a, b, tile_cols)


@nki.jit
def add_kernel_new(a, b):
    """c = a + b; under ``[2]`` each logical core takes half of the rows (any row and column count)."""
    rows, cols = a.shape
    c = nl.ndarray((rows, cols), dtype=a.dtype, buffer=nl.shared_hbm)
    P, F = nl.tile_size.pmax, 512
    share = math.ceil(rows / nl.num_programs())
    first = nl.program_id(0) * share
    last = min(rows, first + share)
    for r0 in range(first, last, P):
        r1 = min(last, r0 + P)
        for f0 in range(0, cols, F):
            f1 = min(cols, f0 + F)
            a_t = nl.ndarray((P, F), dtype=a.dtype, buffer=nl.sbuf)
            b_t = nl.ndarray((P, F), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_t[0:r1 - r0, 0:f1 - f0], src=a[r0:r1, f0:f1])
            nisa.dma_copy(dst=b_t[0:r1 - r0, 0:f1 - f0], src=b[r0:r1, f0:f1])
            c_t = nl.ndarray((P, F), dtype=c.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=c_t[0:r1 - r0, 0:f1 - f0], data1=a_t[0:r1 - r0, 0:f1 - f0],
                               data2=b_t[0:r1 - r0, 0:f1 - f0], op=nl.add)
            nisa.dma_copy(dst=c[r0:r1, f0:f1], src=c_t[0:r1 - r0, 0:f1 - f0])
    return c


def main(device: str = "cpu") -> None:
    """Run the kernels on ``device`` tensors and compare with torch on CPU."""
    from _check import check, on_device
    on = on_device(device)
    torch.manual_seed(0)
    a, b = torch.randn(300, 700), torch.randn(300, 700)
    check("vector add, legacy, grid (3, 2)", add_legacy(*on(a, b)), a + b, atol=0, rtol=0)
    check("vector add, new, LNC2", add_kernel_new[2](*on(a, b)), a + b, atol=0, rtol=0)
    ah, bh = a.to(torch.float16), b.to(torch.float16)
    check("vector add, legacy, fp16", add_legacy(*on(ah, bh)), ah + bh, atol=0, rtol=0)
    print(add_kernel_new.last_result)


if __name__ == "__main__":
    from _check import device_from_args
    main(device_from_args(__doc__.split("\n")[0]))
