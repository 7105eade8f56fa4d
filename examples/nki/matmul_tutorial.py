"""The four matmul kernels of AWS's NKI matrix-multiplication tutorial, written again (legacy dialect, the
one the tutorial used when it published its Trn1 timings), so the cost model's validation table can run
them through ``nki.benchmark`` (bench/costmodel_rows/matmul.py).

``result[M, N] = lhsT.T @ rhs`` with ``lhsT`` [K, M] and ``rhs`` [K, N], bf16, in four steps of the tutorial
(Neuron SDK docs, general/nki/tutorials/matrix_multiplication.rst, 2.20-2.23):

- ``matmul_tiled``: for every 128 x 512 output tile and every 128-row slice of K, load both operand tiles
  and accumulate one ``nc_matmul`` in PSUM (two loads per matmul);
- ``matmul_hoist_load``: the lhsT tiles of an M tile are loaded once for all of N, the rhs tiles of an
  N tile once for its K loop;
- ``matmul_block_free``: M in blocks of 2 tiles and N in blocks of 2 tiles, so each loaded tile serves
  two output tiles;
- ``matmul_block_all``: M, N and K blocked (16 x 128, 2 x 512, 8 x 128 by default), the result block
  accumulated in SBUF across the K blocks and stored once.

Run as a script (add ``--device neuron`` for neuron tensors) to check the four against torch and print
each one's estimate.
"""
from __future__ import annotations

import numpy as np

import torchneuron_ext.nki.legacy as nki
import torchneuron_ext.nki.legacy.isa as nisa
import torchneuron_ext.nki.legacy.language as nl

TILE_K, TILE_M, TILE_N = 128, 128, 512


def _dims(lhsT, rhs):
    K, M = lhsT.shape
    K2, N = rhs.shape
    assert K == K2, f"contraction sizes differ: lhsT {lhsT.shape}, rhs {rhs.shape}"
    return K, M, N


def matmul_tiled(lhsT, rhs):
    K, M, N = _dims(lhsT, rhs)
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            acc = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                a = nl.load(lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                b = nl.load(rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                acc += nisa.nc_matmul(a, b)
            nl.store(result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N],
                     value=nl.copy(acc, dtype=result.dtype))
    return result


def matmul_hoist_load(lhsT, rhs):
    K, M, N = _dims(lhsT, rhs)
    KT = K // TILE_K
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        a = nl.ndarray((KT, nl.par_dim(TILE_K), TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(KT):
            a[k] = nl.load(lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
        for n in nl.affine_range(N // TILE_N):
            b = nl.ndarray((KT, nl.par_dim(TILE_K), TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(KT):
                b[k] = nl.load(rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
            acc = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(KT):
                acc += nisa.nc_matmul(a[k], b[k])
            nl.store(result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N],
                     value=nl.copy(acc, dtype=result.dtype))
    return result


def matmul_block_free(lhsT, rhs, TILES_M=2, TILES_N=2):
    K, M, N = _dims(lhsT, rhs)
    KT = K // TILE_K
    BM, BN = TILE_M * TILES_M, TILE_N * TILES_N
    assert M % BM == 0 and N % BN == 0, f"M and N must be multiples of {BM} and {BN}"
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // BM):
        a = nl.ndarray((TILES_M, KT, nl.par_dim(TILE_K), TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
        for bm in nl.affine_range(TILES_M):
            col = m * BM + bm * TILE_M
            for k in nl.affine_range(KT):
                a[bm, k] = nl.load(lhsT[k * TILE_K:(k + 1) * TILE_K, col:col + TILE_M])
        for n in nl.affine_range(N // BN):
            b = nl.ndarray((TILES_N, KT, nl.par_dim(TILE_K), TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
            for bn in nl.affine_range(TILES_N):
                col = n * BN + bn * TILE_N
                for k in nl.affine_range(KT):
                    b[bn, k] = nl.load(rhs[k * TILE_K:(k + 1) * TILE_K, col:col + TILE_N])
            for bm in nl.affine_range(TILES_M):
                for bn in nl.affine_range(TILES_N):
                    acc = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(KT):
                        acc += nisa.nc_matmul(a[bm, k], b[bn, k])
                    row, col = m * BM + bm * TILE_M, n * BN + bn * TILE_N
                    nl.store(result[row:row + TILE_M, col:col + TILE_N], value=nl.copy(acc, dtype=result.dtype))
    return result


def matmul_block_all(lhsT, rhs, TILES_M=16, TILES_N=2, TILES_K=8):
    K, M, N = _dims(lhsT, rhs)
    BM, BN, BK = TILE_M * TILES_M, TILE_N * TILES_N, TILE_K * TILES_K
    assert M % BM == 0 and N % BN == 0 and K % BK == 0, f"M, N, K must be multiples of {BM}, {BN}, {BK}"
    NBM = M // BM
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for n in nl.affine_range(N // BN):
        # The result tiles of every M tile for this N block, accumulated in SBUF over the K blocks.
        res = nl.zeros((NBM, TILES_M, TILES_N, nl.par_dim(TILE_M), TILE_N), dtype=lhsT.dtype, buffer=nl.sbuf)
        for kb in nl.sequential_range(K // BK):
            b = nl.ndarray((TILES_K, nl.par_dim(TILE_K), BN), dtype=rhs.dtype, buffer=nl.sbuf)
            for bk in nl.affine_range(TILES_K):
                row = kb * BK + bk * TILE_K
                b[bk] = nl.load(rhs[row:row + TILE_K, n * BN:(n + 1) * BN])
            for m in nl.affine_range(NBM):
                a = nl.ndarray((TILES_K, nl.par_dim(TILE_K), BM), dtype=lhsT.dtype, buffer=nl.sbuf)
                for bk in nl.affine_range(TILES_K):
                    row = kb * BK + bk * TILE_K
                    a[bk] = nl.load(lhsT[row:row + TILE_K, m * BM:(m + 1) * BM])
                for bn in nl.affine_range(TILES_N):
                    for bm in nl.affine_range(TILES_M):
                        acc = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
                        for bk in nl.affine_range(TILES_K):
                            acc += nisa.nc_matmul(a[bk, :, bm * TILE_M:(bm + 1) * TILE_M],
                                                  b[bk, :, bn * TILE_N:(bn + 1) * TILE_N])
                        res[m, bm, bn] += acc
        for m in nl.affine_range(NBM):
            for bm in nl.affine_range(TILES_M):
                # One store per M tile: the N block's tiles side by side in one SBUF tile.
                packed = nl.ndarray((nl.par_dim(TILE_M), BN), dtype=lhsT.dtype, buffer=nl.sbuf)
                for bn in nl.affine_range(TILES_N):
                    packed[:, bn * TILE_N:(bn + 1) * TILE_N] = nl.copy(res[m, bm, bn])
                row = m * BM + bm * TILE_M
                nl.store(result[row:row + TILE_M, n * BN:(n + 1) * BN], value=packed)
    return result


KERNELS = {"tiled": matmul_tiled, "hoist_load": matmul_hoist_load, "block_free": matmul_block_free,
           "block_all": matmul_block_all}


def main(device: str = "cpu") -> None:
    """Check the four kernels against torch (bf16, a small shape; the fully optimized one with smaller
    blocks), then print each one's nki.benchmark estimate on trn1 at a shape its default blocks take."""
    import torch

    from _check import check, on_device
    on = on_device(device)
    torch.manual_seed(0)
    lhsT, rhs = torch.randn(256, 512).bfloat16(), torch.randn(256, 1024).bfloat16()
    want = (lhsT.float().T @ rhs.float()).bfloat16()
    blocks = {"block_all": {"TILES_M": 2, "TILES_N": 2, "TILES_K": 2}}
    for name, f in KERNELS.items():
        got = nki.jit(f)(*on(lhsT, rhs), **blocks.get(name, {}))
        check(f"matmul tutorial, {name}, 512x256x1024 bf16", got, want, atol=0.5, rtol=2e-2)
    import ml_dtypes
    a = np.ones((1024, 2048), ml_dtypes.bfloat16)
    b = np.ones((1024, 1024), ml_dtypes.bfloat16)
    for name, f in KERNELS.items():
        bench = nki.benchmark(warmup=0, iters=1, platform_target="trn1")(f)
        bench(a, b)
        print(f"{name:11s} {bench.benchmark_result.nc_latency.get_latency_percentile(50):10.1f} us on trn1 "
              f"(2048x1024x1024 bf16)")


if __name__ == "__main__":
    from _check import device_from_args
    main(device_from_args(__doc__.split("\n")[0]))
