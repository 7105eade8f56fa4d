"""2-D transpose, out = x.T, by 128x128 blocks on the Tensor engine (``nc_transpose`` goes through PSUM).

Block (i, j) of x becomes block (j, i) of the result. Legacy: arange indices with masks on the ragged
edge blocks (the masked load leaves the rest of the block undefined; the masked store writes only the
valid part). New: edge blocks are sliced to their real size.

Run as a script (add ``--device neuron`` for neuron tensors) to check both against torch.
"""
from __future__ import annotations

import math

import torch

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
import torchneuron_ext.nki.legacy as lnki
import torchneuron_ext.nki.legacy.isa as lnisa
import torchneuron_ext.nki.legacy.language as lnl

B = 128  # the Tensor engine transposes at most 128 x 128


@lnki.jit
def transpose_legacy(x):
    rows, cols = x.shape
    out = lnl.ndarray((cols, rows), dtype=x.dtype, buffer=lnl.shared_hbm)
    i_p, i_f = lnl.mgrid[0:B, 0:B]
    for i in lnl.affine_range(math.ceil(rows / B)):
        for j in lnl.affine_range(math.ceil(cols / B)):
            src_ok = (i * B + i_p < rows) & (j * B + i_f < cols)
            block = lnl.load(x[i * B + i_p, j * B + i_f], mask=src_ok)
            flipped = lnisa.nc_transpose(block)  # (B, B) fp32 in PSUM
            dst_ok = (j * B + i_p < cols) & (i * B + i_f < rows)
            lnl.store(out[j * B + i_p, i * B + i_f], value=lnl.copy(flipped, dtype=x.dtype), mask=dst_ok)
    return out


@nki.jit
def transpose_new(x):
    rows, cols = x.shape
    out = nl.ndarray((cols, rows), dtype=x.dtype, buffer=nl.shared_hbm)
    for r0 in range(0, rows, B):
        nr = min(B, rows - r0)
        for c0 in range(0, cols, B):
            nc = min(B, cols - c0)
            block = nl.ndarray((B, B), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=block[0:nr, 0:nc], src=x[r0:r0 + nr, c0:c0 + nc])
            flipped = nl.ndarray((B, B), dtype=x.dtype, buffer=nl.psum)  # a transpose keeps the dtype
            nisa.nc_transpose(dst=flipped[0:nc, 0:nr], data=block[0:nr, 0:nc])
            result = nl.ndarray((B, B), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=result[0:nc, 0:nr], src=flipped[0:nc, 0:nr])
            nisa.dma_copy(dst=out[c0:c0 + nc, r0:r0 + nr], src=result[0:nc, 0:nr])
    return out


def main(device: str = "cpu") -> None:
    """Run the kernels on ``device`` tensors and compare with torch on CPU."""
    from _check import check, on_device
    on = on_device(device)
    torch.manual_seed(0)
    x = torch.randn(300, 200)
    check("transpose, legacy, 300x200 (masked)", transpose_legacy(*on(x)), x.T, atol=0, rtol=0)
    check("transpose, new, 300x200 (sliced)", transpose_new(*on(x)), x.T, atol=0, rtol=0)
    xh = x.half()
    check("transpose, new, fp16", transpose_new(*on(xh)), xh.T, atol=0, rtol=0)


if __name__ == "__main__":
    from _check import device_from_args
    main(device_from_args(__doc__.split("\n")[0]))
