"""Tiled matmul, result = lhsT.T @ rhs, accumulating over K in PSUM.

The Tensor engine contracts over the partition dimension: ``nc_matmul(stationary[K, M], moving[K, N])``
gives ``[M, N]`` with K, M <= 128 and N <= 512, in fp32 in PSUM. A big matmul walks (M, N) output
tiles and, for each, adds up K / 128 partial products in one PSUM tile before copying it to SBUF and
storing it. The dialects differ in how that accumulation is spelled:

- legacy: the PSUM tile starts at zero (``nl.zeros(..., buffer=nl.psum)``) and ``psum += nisa.nc_matmul(...)``.
- new: ``nisa.nc_matmul(dst=psum, ...)``; the first matmul into a PSUM location overwrites it and later
  ones accumulate, so the fresh (uninitialised) PSUM tile needs no memset.

Run as a script (add ``--device neuron`` for neuron tensors) to check both against torch (fp32 and
bf16 operands).
"""
from __future__ import annotations

import torch

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
import torchneuron_ext.nki.legacy as lnki
import torchneuron_ext.nki.legacy.isa as lnisa
import torchneuron_ext.nki.legacy.language as lnl

TILE_K, TILE_M, TILE_N = 128, 128, 512


def _check_shapes(lhsT, rhs):
    K, M = lhsT.shape
    K2, N = rhs.shape
    assert K == K2, f"contraction sizes differ: lhsT is {lhsT.shape}, rhs is {rhs.shape}"
    assert K % TILE_K == 0 and M % TILE_M == 0, f"K and M must be multiples of 128, got K={K}, M={M}"
    assert N % min(N, TILE_N) == 0, f"N must be at most 512 or a multiple of 512, got {N}"
    return K, M, N, min(N, TILE_N)


@lnki.jit
def matmul_legacy(lhsT, rhs):
    K, M, N, tile_n = _check_shapes(lhsT, rhs)
    result = lnl.ndarray((M, N), dtype=lhsT.dtype, buffer=lnl.shared_hbm)
    for m in lnl.affine_range(M // TILE_M):
        for n in lnl.affine_range(N // tile_n):
            acc = lnl.zeros((TILE_M, tile_n), lnl.float32, buffer=lnl.psum)
            for k in lnl.affine_range(K // TILE_K):
                lhsT_tile = lnl.load(lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                rhs_tile = lnl.load(rhs[k * TILE_K:(k + 1) * TILE_K, n * tile_n:(n + 1) * tile_n])
                acc += lnisa.nc_matmul(lhsT_tile, rhs_tile)
            out_tile = lnl.copy(acc, dtype=result.dtype)
            lnl.store(result[m * TILE_M:(m + 1) * TILE_M, n * tile_n:(n + 1) * tile_n], value=out_tile)
    return result


@nki.jit
def matmul_new(lhsT, rhs):
    K, M, N, tile_n = _check_shapes(lhsT, rhs)
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in range(M // TILE_M):
        for n in range(N // tile_n):
            acc = nl.ndarray((TILE_M, tile_n), dtype=nl.float32, buffer=nl.psum)
            for k in range(K // TILE_K):
                lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((TILE_K, tile_n), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhsT_tile, src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                nisa.dma_copy(dst=rhs_tile, src=rhs[k * TILE_K:(k + 1) * TILE_K, n * tile_n:(n + 1) * tile_n])
                nisa.nc_matmul(dst=acc, stationary=lhsT_tile, moving=rhs_tile)
            out_tile = nl.ndarray((TILE_M, tile_n), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out_tile, src=acc)
            nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * tile_n:(n + 1) * tile_n], src=out_tile)
    return result


def reference(lhsT: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    return (lhsT.float().T @ rhs.float()).to(lhsT.dtype)


def main(device: str = "cpu") -> None:
    """Run the kernels on ``device`` tensors and compare with torch on CPU."""
    from _check import check, on_device
    on = on_device(device)
    torch.manual_seed(0)
    lhsT, rhs = torch.randn(384, 256), torch.randn(384, 1024)
    check("matmul, legacy, 256x1024x384 fp32", matmul_legacy(*on(lhsT, rhs)), reference(lhsT, rhs), atol=1e-4, rtol=1e-4)
    check("matmul, new, 256x1024x384 fp32", matmul_new(*on(lhsT, rhs)), reference(lhsT, rhs), atol=1e-4, rtol=1e-4)
    lb, rb = lhsT.bfloat16(), rhs.bfloat16()
    check("matmul, legacy, bf16", matmul_legacy(*on(lb, rb)), reference(lb, rb), atol=1e-1, rtol=1e-2)
    check("matmul, new, bf16", matmul_new(*on(lb, rb)), reference(lb, rb), atol=1e-1, rtol=1e-2)
    print(matmul_new.last_result)


if __name__ == "__main__":
    from _check import device_from_args
    main(device_from_args(__doc__.split("\n")[0]))
