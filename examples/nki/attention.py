"""A small fused attention, out = softmax(q @ k.T * scale) @ v, in one kernel.

Shapes: q (Sq, d), k and v (Sk, d) with d <= 128, Sq a multiple of 128 and Sk a multiple of 128 up to
512 (one PSUM bank of scores per 128 queries). For each block of 128 queries:

1. scores[128, Sk] = nc_matmul(qT[d, 128], kT[d, Sk]) on the Tensor engine (contracting over d, the
   partition dimension of both; q and k are transposed on the way in).
2. Softmax numerator in two instructions: the row max (negated) by ``tensor_reduce``, then one
   ``activation`` computes exp(scale * s - scale * max) and sums each row into ``reduce_res``.
3. out[128, d] = probs @ v, accumulated in PSUM over 128-key blocks; probs is transposed block by
   block so keys sit on the partitions.
4. Divide by the row sums (``tensor_scalar`` with the reciprocal) and store.

Run as a script (add ``--device neuron`` for neuron tensors) to check both dialects against torch's
scaled_dot_product_attention.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
import torchneuron_ext.nki.legacy as lnki
import torchneuron_ext.nki.legacy.isa as lnisa
import torchneuron_ext.nki.legacy.language as lnl

B = 128


def _check_shapes(q, k, v):
    sq, d = q.shape
    sk = k.shape[0]
    assert k.shape == v.shape == (sk, d), f"k and v must be ({sk}, {d}), got {k.shape} and {v.shape}"
    assert d <= 128 and sq % B == 0 and sk % B == 0 and sk <= 512, \
        f"this kernel takes d <= 128, Sq % 128 == 0 and Sk in (128, 256, 384, 512); got q {q.shape}, k {k.shape}"
    return sq, sk, d


@lnki.jit
def attention_legacy(q, k, v, scale=None):
    sq, sk, d = _check_shapes(q, k, v)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    out = lnl.ndarray((sq, d), dtype=q.dtype, buffer=lnl.shared_hbm)
    kT = lnl.ndarray((d, sk), dtype=k.dtype)
    v_blocks = lnl.ndarray((sk // B, lnl.par_dim(B), d), dtype=v.dtype)  # block b holds keys b*128..
    for j in lnl.affine_range(sk // B):
        kT[:, j * B:(j + 1) * B] = lnl.load_transpose2d(k[j * B:(j + 1) * B, :])
        v_blocks[j] = lnl.load(v[j * B:(j + 1) * B, :])
    for i in lnl.affine_range(sq // B):
        qT = lnl.load_transpose2d(q[i * B:(i + 1) * B, :])  # (d, 128)
        scores = lnisa.nc_matmul(qT, kT)  # (128, sk) fp32 in PSUM
        neg_max = lnisa.tensor_reduce(np.max, scores, axis=[1], negate=True)
        row_sum = lnl.ndarray((B, 1), dtype=lnl.float32)
        probs = lnisa.activation_reduce(op=lnl.exp, data=scores, bias=lnl.multiply(neg_max, scale),
                                        scale=scale, reduce_op=lnl.add, reduce_res=row_sum, dtype=q.dtype)
        acc = lnl.zeros((B, d), dtype=lnl.float32, buffer=lnl.psum)
        for j in lnl.affine_range(sk // B):
            probsT = lnl.copy(lnisa.nc_transpose(probs[:, j * B:(j + 1) * B]), dtype=q.dtype)
            acc += lnisa.nc_matmul(probsT, v_blocks[j])
        result = lnisa.tensor_scalar(acc, np.multiply, lnisa.reciprocal(row_sum), dtype=q.dtype)
        lnl.store(out[i * B:(i + 1) * B, :], value=result)
    return out


@nki.jit
def attention_new(q, k, v, scale=None):
    sq, sk, d = _check_shapes(q, k, v)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    out = nl.ndarray((sq, d), dtype=q.dtype, buffer=nl.shared_hbm)
    kT = nl.ndarray((d, sk), dtype=k.dtype, buffer=nl.sbuf)
    v_blocks = []
    for j in range(sk // B):
        k_blk = nl.ndarray((B, d), dtype=k.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=k_blk, src=k[j * B:(j + 1) * B, :])
        kT_ps = nl.ndarray((d, B), dtype=k.dtype, buffer=nl.psum)  # a transpose keeps the dtype
        nisa.nc_transpose(dst=kT_ps, data=k_blk)
        nisa.tensor_copy(dst=kT[:, j * B:(j + 1) * B], src=kT_ps)
        v_blk = nl.ndarray((B, d), dtype=v.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=v_blk, src=v[j * B:(j + 1) * B, :])
        v_blocks.append(v_blk)
    for i in range(sq // B):
        q_blk = nl.ndarray((B, d), dtype=q.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=q_blk, src=q[i * B:(i + 1) * B, :])
        qT_ps = nl.ndarray((d, B), dtype=q.dtype, buffer=nl.psum)
        nisa.nc_transpose(dst=qT_ps, data=q_blk)
        qT = nl.ndarray((d, B), dtype=q.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=qT, src=qT_ps)
        scores = nl.ndarray((B, sk), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=scores, stationary=qT, moving=kT)
        bias = nl.ndarray((B, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=bias, op=nl.maximum, data=scores, axis=1, negate=True)
        nisa.tensor_scalar(dst=bias, data=bias, op0=nl.multiply, operand0=scale)
        probs = nl.ndarray((B, sk), dtype=q.dtype, buffer=nl.sbuf)
        row_sum = nl.ndarray((B, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=probs, op=nl.exp, data=scores, bias=bias, scale=scale, reduce_op=nl.add,
                               reduce_res=row_sum)
        acc = nl.ndarray((B, d), dtype=nl.float32, buffer=nl.psum)
        for j in range(sk // B):
            pT_ps = nl.ndarray((B, B), dtype=probs.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=pT_ps, data=probs[:, j * B:(j + 1) * B])
            pT = nl.ndarray((B, B), dtype=q.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=pT, src=pT_ps)
            nisa.nc_matmul(dst=acc, stationary=pT, moving=v_blocks[j])
        inv_sum = nl.ndarray((B, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum, data=row_sum)
        result = nl.ndarray((B, d), dtype=q.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=result, data=acc, op0=nl.multiply, operand0=inv_sum)
        nisa.dma_copy(dst=out[i * B:(i + 1) * B, :], src=result)
    return out


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: Optional[float] = None) -> torch.Tensor:
    return torch.nn.functional.scaled_dot_product_attention(q.float()[None], k.float()[None], v.float()[None],
                                                            scale=scale)[0].to(q.dtype)


def main(device: str = "cpu") -> None:
    """Run the kernels on ``device`` tensors and compare with torch on CPU."""
    from _check import check, on_device
    on = on_device(device)
    torch.manual_seed(0)
    q, k, v = torch.randn(256, 64), torch.randn(384, 64), torch.randn(384, 64)
    check("attention, legacy, q 256x64, kv 384x64", attention_legacy(*on(q, k, v)), reference(q, k, v),
          atol=1e-5, rtol=1e-4)
    check("attention, new, q 256x64, kv 384x64", attention_new(*on(q, k, v)), reference(q, k, v), atol=1e-5, rtol=1e-4)
    qb, kb, vb = q.bfloat16(), k.bfloat16(), v.bfloat16()
    check("attention, legacy, bf16", attention_legacy(*on(qb, kb, vb)), reference(qb, kb, vb), atol=2e-2, rtol=2e-2)
    check("attention, new, bf16", attention_new(*on(qb, kb, vb)), reference(qb, kb, vb), atol=2e-2, rtol=2e-2)


if __name__ == "__main__":
    from _check import device_from_args
    main(device_from_args(__doc__.split("\n")[0]))
