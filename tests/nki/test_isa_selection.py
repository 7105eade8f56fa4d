"""Selection, scan and top-8 instructions of both dialects, against numpy."""
from __future__ import annotations

import numpy as np

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
import torchneuron_ext.nki.legacy as lnki
import torchneuron_ext.nki.legacy.isa as lisa
import torchneuron_ext.nki.legacy.language as lnl

RNG = np.random.default_rng(1)


def test_causal_mask_with_affine_select_in_both_dialects():
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    expected = np.where(np.arange(64)[:, None] >= np.arange(64)[None, :], x, -1e4)

    @lnki.jit
    def legacy(a):
        out = lnl.ndarray(a.shape, dtype=a.dtype, buffer=lnl.shared_hbm)
        i_q = lnl.arange(64)[:, None]
        i_k = lnl.arange(64)[None, :]
        lnl.store(out, value=lisa.affine_select(i_q >= i_k, lnl.load(a), -1e4))
        return out

    @nki.jit
    def new(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        r = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        # keep where p - k >= 0
        nisa.affine_select(dst=r, pattern=[[-1, 64]], offset=0, channel_multiplier=1, on_true_tile=t,
                           on_false_value=-1e4, cmp_op=nl.greater_equal)
        nisa.dma_copy(dst=out, src=r)
        return out

    np.testing.assert_array_equal(legacy(x), expected)
    np.testing.assert_array_equal(new(x), expected)


def test_scalar_tensor_tensor_scan_and_top8():
    x = RNG.standard_normal((16, 32)).astype(np.float32)
    y = RNG.standard_normal((16, 32)).astype(np.float32)

    @lnki.jit
    def k(a, b):
        outs = [lnl.ndarray((16, n), dtype=lnl.float32, buffer=lnl.shared_hbm) for n in (32, 32, 8)]
        ta, tb = lnl.load(a), lnl.load(b)
        lnl.store(outs[0], value=lisa.scalar_tensor_tensor(data=ta, op0=np.multiply, operand0=2.0, op1=np.add,
                                                          operand1=tb))
        lnl.store(outs[1], value=lisa.tensor_tensor_scan(ta, tb, 0.0, np.multiply, np.add))
        lnl.store(outs[2], value=lisa.max8(src=ta))
        return tuple(outs)

    sts, scan, top = k(x, y)
    np.testing.assert_allclose(sts, x * 2 + y, rtol=1e-6)
    ref = np.zeros_like(x)
    prev = np.zeros(16, np.float32)
    for i in range(32):  # h_i = h_{i-1} * a_i + b_i, the recurrence of a linear scan
        prev = prev * x[:, i] + y[:, i]
        ref[:, i] = prev
    np.testing.assert_allclose(scan, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(top, -np.sort(-x, axis=1)[:, :8])


def test_find_index8_and_iota_pattern():
    x = RNG.permutation(np.arange(32, dtype=np.float32)).reshape(1, 32).repeat(4, axis=0)

    @nki.jit
    def k(a):
        out = nl.ndarray((4, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
        io = nl.ndarray((4, 6), dtype=nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        top = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.sbuf)
        nisa.max8(dst=top, src=t)
        idx = nl.ndarray((4, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=idx, data=t, vals=top)
        nisa.dma_copy(dst=out, src=idx)
        it = nl.ndarray((4, 6), dtype=nl.int32, buffer=nl.sbuf)
        nisa.iota(it, [[2, 3], [1, 2]], offset=5, channel_multiplier=10)
        nisa.dma_copy(dst=io, src=it)
        return out, io

    idx, io = k(x)
    expected_idx = np.argsort(-x, axis=1, kind="stable")[:, :8]
    np.testing.assert_array_equal(idx, expected_idx)
    expected_io = 5 + 10 * np.arange(4)[:, None, None] + 2 * np.arange(3)[None, :, None] + np.arange(2)[None, None, :]
    np.testing.assert_array_equal(io, expected_io.reshape(4, 6))
