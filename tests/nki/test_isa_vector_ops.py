"""nki.isa's Vector, GpSimd and Scalar instructions of nki/isa/vector_ops.py (and exponential, activation's
registers, affine_select's argument order): each against a numpy reference of AWS's documented semantics, in
kernels written as AWS writes them (dst first, SBUF tiles, dma_copy), with their keywords and error paths."""
from __future__ import annotations

from typing import Any, Callable

import expecttest
import numpy as np
import pytest

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
from torchneuron_ext.nki import NKIError

from .kernel_io import load, store

FP32_MIN = float(np.finfo(np.float32).min)


def f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def error(kernel: Callable, *args: Any) -> NKIError:
    with pytest.raises(NKIError) as info:
        kernel(*args)
    return info.value


def message(kernel: Callable, *args: Any) -> str:
    """The compiler-style message (with its code, without the kernel's file and line)."""
    return error(kernel, *args).msg


@pytest.fixture
def trn3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NKI_TARGET", "trn3")


@pytest.fixture
def trn2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NKI_TARGET", "trn2")


# -- nc_stream_shuffle ------------------------------------------------------------------------------------

def test_stream_shuffle_broadcasts_a_partition_to_each_quadrant() -> None:
    # AWS's NKI Library broadcasts a (1, F) row to 32 partitions at a time (utils/stream_shuffle_broadcast.py).
    @nki.jit
    def k(row):
        src = load(row)
        dst = nl.ndarray((64, row.shape[1]), dtype=row.dtype, buffer=nl.sbuf)
        for q in range(2):
            nisa.nc_stream_shuffle(dst=dst[q * 32:(q + 1) * 32, :], src=src[0:1, :], shuffle_mask=[0] * 32)
        return store(dst)

    row = f32(1, 24)
    np.testing.assert_array_equal(k(row), np.repeat(row, 64, axis=0))


def test_stream_shuffle_in_place_leaves_255_partitions_alone() -> None:
    @nki.jit
    def k(a):
        t = load(a)
        mask = [16] + [255] * 31     # partition 16 of each quadrant to its partition 0 (find_nonzero_indices)
        nisa.nc_stream_shuffle(dst=t, src=t, shuffle_mask=mask)
        return store(t)

    a = f32(64, 5)
    expected = a.copy()
    expected[0], expected[32] = a[16], a[48]
    np.testing.assert_array_equal(k(a), expected)


def test_stream_shuffle_errors() -> None:
    @nki.jit
    def k(a, dtype, mask):
        t = load(a)
        d = nl.ndarray(a.shape, dtype=dtype, buffer=nl.sbuf)
        nisa.nc_stream_shuffle(dst=d, src=t, shuffle_mask=mask)
        return store(d)

    a = f32(32, 4)
    expecttest.assert_expected_inline(message(k, a, nl.bfloat16, [0] * 32), """'nc_stream_shuffle': dst must have src's dtype (float32), got bfloat16 [err_unsupported_dtype]""")
    expecttest.assert_expected_inline(message(k, a, nl.float32, [0] * 31), """'nc_stream_shuffle': shuffle_mask is 32 source partitions in 0..31 (or 255), got [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] [err_invalid_shuffle_mask]""")


# -- nc_match_replace8 -------------------------------------------------------------------------------------

def test_match_replace8_pairs_duplicate_vals_in_descending_order() -> None:
    # The example of AWS's reference: vals are matched from the last to the first.
    @nki.jit
    def k(data, vals):
        d, v = load(data), load(vals)
        out = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)
        idx = nl.ndarray((data.shape[0], 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.nc_match_replace8(dst=out, data=d, vals=v, imm=-1.0, dst_idx=idx)
        return store(out), store(idx)

    data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    out, idx = k(data, vals)
    np.testing.assert_array_equal(idx, [[2, 10, 9, 8, 7, 6, 5, 4]])
    np.testing.assert_array_equal(out, [[1, 2, -1, 4, -1, -1, -1, -1, -1, -1, -1]])


def test_max8_and_match_replace8_give_a_top_16() -> None:
    # The NKI Library's top-k: max8, then replace those 8 by -inf in place and take the next 8.
    @nki.jit
    def k(x):
        t = load(x)
        top = nl.ndarray((x.shape[0], 16), dtype=x.dtype, buffer=nl.sbuf)
        for r in range(2):
            nisa.max8(dst=top[:, r * 8:(r + 1) * 8], src=t)
            nisa.nc_match_replace8(dst=t, data=t, vals=top[:, r * 8:(r + 1) * 8], imm=float("-inf"))
        return store(top)

    x = f32(16, 100)
    np.testing.assert_array_equal(k(x), -np.sort(-x, axis=1)[:, :16])


# -- range_select and select_reduce, with the Vector engine's registers -------------------------------------

def test_range_select_and_its_running_max(trn2: None) -> None:
    @nki.jit
    def k(x, lo, hi):
        t, b0, b1 = load(x), load(lo), load(hi)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        red = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.range_select(dst=out, on_true_tile=t, comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=b0,
                          bound1=b1, reduce_op=nl.maximum, reduce_res=red, range_start=4)
        return store(out), store(red)

    x = f32(8, 16)
    lo = np.full((8, 1), 6, np.float32)
    hi = np.arange(8, 16, dtype=np.float32).reshape(8, 1)
    idx = np.arange(16)[None, :] + 4
    expected = np.where((idx >= lo) & (idx < hi), x, FP32_MIN)
    out, red = k(x, lo, hi)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(red, expected.max(axis=1, keepdims=True))


def test_range_select_rules(trn2: None, monkeypatch: pytest.MonkeyPatch) -> None:
    @nki.jit
    def k(x, lo, fill):
        t, b = load(x), load(lo)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.range_select(dst=out, on_true_tile=t, comp_op0=nl.greater_equal, comp_op1=nl.less_equal, bound0=b,
                          bound1=b, on_false_value=fill)
        return store(out)

    x, lo = f32(4, 8), np.zeros((4, 1), np.float32)
    np.testing.assert_array_equal(k(x, lo, FP32_MIN)[:, 1:], np.full((4, 7), FP32_MIN, np.float32))
    expecttest.assert_expected_inline(message(k, x, lo, -1.0), """'range_select': on_false_value must be FP32_MIN (-3.4028235e+38), a hardware constraint, got -1.0 [err_invalid_argument]""")
    expecttest.assert_expected_inline(message(k, x, lo.astype(np.float16), FP32_MIN), """'range_select': bound0 must be float32, got float16 [err_unsupported_dtype]""")
    monkeypatch.setenv("NKI_TARGET", "trn1")
    expecttest.assert_expected_inline(message(k, x, lo, FP32_MIN), """'range_select' needs NeuronCore-v3 or later; the target is trn1 (NeuronCore-v2) [err_unsupported_instruction]""")


def test_select_reduce_folds_into_the_registers_range_select_started(trn2: None) -> None:
    # The registers are shared across the Vector engine's accumulating instructions (AWS's reference).
    @nki.jit
    def k(x, y, pred, lo):
        tx, ty, p, b = load(x), load(y), load(pred), load(lo)
        s0 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        s1 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        red = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.range_select(dst=s0, on_true_tile=tx, comp_op0=nl.greater_equal, comp_op1=nl.greater_equal,
                          bound0=b, bound1=b, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.select_reduce(dst=s1, predicate=p, on_true=ty, on_false=-5.0, reduce_res=red,
                           reduce_cmd=nisa.reduce_cmd.reduce, reverse_pred=True)
        return store(s1), store(red)

    x, y = f32(8, 16, seed=1), f32(8, 16, seed=2)
    pred = (np.arange(128).reshape(8, 16) % 3 == 0).astype(np.uint8)
    lo = np.full((8, 1), 4, np.float32)
    s1, red = k(x, y, pred, lo)
    expected_s1 = np.where(pred == 0, y, -5.0)
    np.testing.assert_array_equal(s1, expected_s1)
    expected_s0 = np.where(np.arange(16)[None, :] >= 4, x, FP32_MIN)
    np.testing.assert_array_equal(red, np.maximum(expected_s0.max(1, keepdims=True),
                                                  expected_s1.max(1, keepdims=True)))


def test_select_reduce_with_a_vector_on_false_and_its_dtype_rules() -> None:
    @nki.jit
    def k(x, pred, f):
        tx, p, tf = load(x), load(pred), load(f)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.select_reduce(dst=out, predicate=p, on_true=tx, on_false=tf)
        return store(out)

    x, f = f32(4, 6), f32(4, 1, seed=3)
    pred = np.eye(4, 6, dtype=np.uint16)
    np.testing.assert_array_equal(k(x, pred, f), np.where(pred != 0, x, f))
    expecttest.assert_expected_inline(message(k, x, pred.astype(np.float32), f), """'select_reduce': predicate must be int8, uint8, int16 or uint16, got float32 [err_unsupported_dtype]""")
    expecttest.assert_expected_inline(message(k, x.astype(np.int32), pred, f), """'select_reduce': on_true cannot be int32 (tfloat32, int32 and uint32 are not supported) [err_unsupported_dtype]""")


# -- tensor_scalar_reduce and tensor_scalar_cumulative ------------------------------------------------------

def test_tensor_scalar_reduce_commands() -> None:
    @nki.jit
    def k(a, b):
        ta, tb = load(a), load(b)
        ya = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        yb = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        r0 = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        r1 = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        r2 = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        # A row sum over two tiles: reset_reduce (the default), then reduce.
        nisa.tensor_scalar_reduce(dst=ya, data=ta, op0=nl.multiply, operand0=2.0, reduce_op=nl.add)
        nisa.tensor_scalar_reduce(dst=yb, data=tb, op0=nl.multiply, operand0=2.0, reduce_op=nl.add, reduce_res=r0,
                                  reduce_cmd=nisa.reduce_cmd.reduce)
        # load_reduce starts from reduce_init; reduce_res_negate negates what is written, not the registers.
        nisa.tensor_scalar_reduce(dst=ya, data=ta, op0=nl.abs, operand0=0.0, reduce_op=nl.maximum,
                                  reduce_res=r1, reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=3.0,
                                  reduce_res_negate=True)
        nisa.tensor_scalar_reduce(dst=yb, data=tb, op0=nl.add, operand0=0.0, reduce_op=nl.maximum,
                                  reduce_res=r2, reduce_cmd=nisa.reduce_cmd.reduce)
        return store(ya), store(r0), store(r1), store(r2)

    a, b = f32(8, 32, seed=1), f32(8, 32, seed=2)
    ya, r0, r1, r2 = k(a, b)
    np.testing.assert_array_equal(ya, np.abs(a))
    np.testing.assert_allclose(r0, 2 * (a.sum(1, keepdims=True) + b.sum(1, keepdims=True)), rtol=1e-5)
    first = np.maximum(3.0, np.abs(a).max(1, keepdims=True))
    np.testing.assert_array_equal(r1, -first)
    np.testing.assert_array_equal(r2, np.maximum(first, b.max(1, keepdims=True)))


def test_tensor_scalar_reduce_rules() -> None:
    @nki.jit
    def k(a, reverse0, cmd, init):
        t = load(a)
        y = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        r = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=y, data=t, op0=nl.subtract, operand0=1.0, reduce_op=nl.add, reduce_res=r,
                                  reverse0=reverse0, reduce_cmd=cmd, reduce_init=init)
        return store(r)

    a = f32(4, 8)
    np.testing.assert_allclose(k(a, False, nisa.reduce_cmd.reset_reduce, None),
                               (a - 1).sum(1, keepdims=True), rtol=1e-5)
    expecttest.assert_expected_inline(message(k, a, True, nisa.reduce_cmd.reset_reduce, None), """'tensor_scalar_reduce': reverse0=True is not supported by the ISA yet [err_invalid_argument]""")
    expecttest.assert_expected_inline(message(k, a, False, nisa.reduce_cmd.reset_reduce, 1.0), """'tensor_scalar_reduce': reduce_init is only read with reduce_cmd=load_reduce, got reset_reduce [err_invalid_argument]""")
    expecttest.assert_expected_inline(message(k, a, False, nisa.reduce_cmd.load_reduce, None), """'tensor_scalar_reduce' with reduce_cmd=load_reduce needs the initial value (reduce_init) [err_missing_argument]""")


def test_tensor_scalar_reduce_unary_op0_takes_no_operand() -> None:
    @nki.jit
    def k(a, operand0):
        t = load(a)
        y = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        r = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=y, data=t, op0=nl.abs, operand0=operand0, reduce_op=nl.maximum, reduce_res=r)
        return store(r)

    a = f32(4, 8)
    np.testing.assert_array_equal(k(a, None), np.abs(a).max(1, keepdims=True))
    expecttest.assert_expected_inline(message(k, a, 2.0), """'tensor_scalar_reduce': operand0 must be None or 0 with the unary op0 abs, got 2.0 [err_invalid_argument]""")


def test_tensor_scalar_cumulative_scans_and_chains() -> None:
    @nki.jit
    def k(a, b, start):
        ta, tb, s = load(a), load(b), load(start)
        c0 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        c1 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        m = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        # A cumulative sum over two tiles of a row: load_reduce from a per-partition start, then reduce.
        nisa.tensor_scalar_cumulative(dst=c0, src=ta, op0=nl.multiply, op1=nl.add, imm0=0.5, imm1=s,
                                      reduce_cmd=nisa.reduce_cmd.load_reduce)
        nisa.tensor_scalar_cumulative(dst=c1, src=tb, op0=nl.multiply, op1=nl.add, imm0=0.5,
                                      reduce_cmd=nisa.reduce_cmd.reduce)
        nisa.tensor_scalar_cumulative(dst=m, src=ta, op0=nl.add, op1=nl.maximum, imm0=1.0)
        return store(c0), store(c1), store(m)

    a, b, start = f32(4, 10, seed=1), f32(4, 10, seed=2), f32(4, 1, seed=3)
    c0, c1, m = k(a, b, start)
    run = start + np.cumsum(0.5 * np.concatenate([a, b], axis=1), axis=1)
    np.testing.assert_allclose(c0, run[:, :10], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c1, run[:, 10:], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(m, np.maximum.accumulate(a + 1, axis=1))


def test_legacy_dialect_tensor_scalar_cumulative_writes_dst() -> None:
    # AWS's SDK (2.26+) examples call it from neuronxcc.nki.isa with dst=.
    import torchneuron_ext.nki.legacy as lnki
    import torchneuron_ext.nki.legacy.isa as lisa
    import torchneuron_ext.nki.legacy.language as lnl

    @lnki.jit
    def k(a, start):
        out = lnl.ndarray(a.shape, dtype=lnl.float32, buffer=lnl.shared_hbm)
        dst = lnl.ndarray(a.shape, dtype=lnl.float32, buffer=lnl.sbuf)
        lisa.tensor_scalar_cumulative(src=lnl.load(a), dst=dst, op0=lnl.add, op1=lnl.add, imm0=1.0,
                                      imm1=lnl.load(start), reduce_cmd=lisa.reduce_cmd.load_reduce)
        lnl.store(out, dst)
        return out

    a, start = f32(4, 10, seed=1), f32(4, 1, seed=3)
    np.testing.assert_allclose(k(a, start), start + np.cumsum(a + 1, axis=1), rtol=1e-5, atol=1e-5)


def test_tensor_scalar_cumulative_subtract_follows_the_pseudocode() -> None:
    # reg = op1(op0(x[i], imm0), reg): for subtract, x[i] - reg.
    @nki.jit
    def k(a):
        t = load(a)
        c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=c, src=t, op0=nl.add, op1=nl.subtract, imm0=0.0)
        return store(c)

    a = np.array([[1, 2, 4, 8]], np.float32)
    np.testing.assert_array_equal(k(a), [[1, 1, 3, 5]])


def test_tensor_scalar_cumulative_refuses_32_bit_integers() -> None:
    @nki.jit
    def k(a):
        t = load(a)
        c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=c, src=t, op0=nl.add, op1=nl.add, imm0=1.0)
        return store(c)

    expecttest.assert_expected_inline(message(k, np.ones((2, 4), np.int32)), """'tensor_scalar_cumulative': src must be one of bfloat16, float16, float32, float8_e4m3, float8_e5m2, uint8, uint16, int8, int16, got int32 [err_unsupported_dtype]""")


# -- gathers ----------------------------------------------------------------------------------------------

def test_local_gather_into_dst() -> None:
    @nki.jit
    def k(src, index):
        s, i = load(src), load(index)
        dst = nl.ndarray((src.shape[0], 40, 2), dtype=src.dtype, buffer=nl.sbuf)
        nisa.local_gather(dst=dst, src_buffer=s, index=i, num_elem_per_idx=2, num_valid_indices=40)
        return store(dst)

    rng = np.random.default_rng(0)
    src = f32(32, 128)
    per_core = rng.integers(0, 63, size=(16, 3)).astype(np.uint16) * 2
    index = np.tile(per_core, (2, 1))
    expected = np.empty((32, 40, 2), np.float32)
    for c in range(2):
        offsets = per_core.flatten(order="F")[:40]
        expected[c * 16:(c + 1) * 16] = src[c * 16:(c + 1) * 16][:, offsets[:, None] + np.arange(2)]
    np.testing.assert_array_equal(k(src, index), expected)
    expecttest.assert_expected_inline(message(k, src, index.astype(np.int32)), """'local_gather': indices must be uint16, got int32 [err_unsupported_dtype]""")


def test_local_gather_limits() -> None:
    @nki.jit
    def k(src, index, n):
        s, i = load(src), load(index)
        dst = nl.ndarray((src.shape[0], 48, n), dtype=src.dtype, buffer=nl.sbuf)
        nisa.local_gather(dst=dst, src_buffer=s, index=i, num_elem_per_idx=n)
        return store(dst)

    src, index = f32(16, 64), np.zeros((16, 3), np.uint16)
    expecttest.assert_expected_inline(message(k, src, index, 3), """'local_gather': num_elem_per_idx must be one of [1, 2, 4, 8, 16, 32], got 3 [err_invalid_argument]""")


def test_nc_n_gather_within_each_partition() -> None:
    @nki.jit
    def k(data, indices):
        d, i = load(data), load(indices)
        dst = nl.ndarray(indices.shape, dtype=data.dtype, buffer=nl.sbuf)
        nisa.nc_n_gather(dst=dst, data=d, indices=i)
        return store(dst)

    data = f32(8, 4, 16)
    indices = np.random.default_rng(1).integers(0, 64, size=(8, 10)).astype(np.uint32)
    np.testing.assert_array_equal(k(data, indices), np.take_along_axis(data.reshape(8, 64), indices, axis=1))
    expecttest.assert_expected_inline(message(k, data, indices.astype(np.int32)), """'nc_n_gather': indices must be uint32, got int32 [err_unsupported_dtype]""")
    expecttest.assert_expected_inline(message(k, data, indices + 64), """'nc_n_gather': indices range [65, 126] outside the 64 elements of a partition of data [err_tensor_access_out_of_bound]""")


# -- nonzero_with_count and sequence_bounds ---------------------------------------------------------------

def test_nonzero_with_count_on_each_gpsimd_core(trn2: None) -> None:
    @nki.jit
    def k(x):
        t = load(x)
        out = nl.ndarray((x.shape[0], x.shape[1] + 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=out, value=7)
        nisa.nonzero_with_count(dst=out, src=t, index_offset=16, padding_val=-1)
        return store(out)

    x = np.zeros((32, 8), np.float32)
    x[0] = [0, 1, 1, 0, 0, 1, 0, 0]       # AWS's example
    x[16, 7] = 2.5
    x[5] = 1                              # not a core's first partition: not read
    out = k(x)
    np.testing.assert_array_equal(out[0], [17, 18, 21, -1, -1, -1, -1, -1, 3])
    np.testing.assert_array_equal(out[16], [23, -1, -1, -1, -1, -1, -1, -1, 1])
    others = np.delete(out, [0, 16], axis=0)
    np.testing.assert_array_equal(others, np.full_like(others, 7))


def test_nonzero_with_count_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    @nki.jit
    def k(x, extra):
        t = load(x)
        out = nl.ndarray((x.shape[0], x.shape[1] + extra), dtype=nl.int32, buffer=nl.sbuf)
        nisa.nonzero_with_count(dst=out, src=t)
        return store(out)

    x = np.ones((16, 4), np.float32)
    expecttest.assert_expected_inline(message(k, x, 2), """'nonzero_with_count': dst must hold one element more than src per partition (5), got 6 [err_shape_mismatch]""")
    expecttest.assert_expected_inline(message(k, x.astype(np.float16), 1), """'nonzero_with_count': src must be float32 or int32, got float16 [err_unsupported_dtype]""")
    monkeypatch.setenv("NKI_TARGET", "trn1")
    expecttest.assert_expected_inline(message(k, x, 1), """'nonzero_with_count' needs NeuronCore-v3 or later; the target is trn1 (NeuronCore-v2) [err_unsupported_instruction]""")


def test_sequence_bounds_into_an_int32_dst() -> None:
    @nki.jit
    def k(seg):
        s = load(seg)
        out = nl.ndarray((1, 2, seg.shape[1]), dtype=nl.int32, buffer=nl.sbuf)
        nisa.sequence_bounds(dst=out, segment_ids=s)
        return store(out)

    seg = np.array([[0, 1, 1, 2, 2, 2, 0, 3, 3]], np.int32)
    np.testing.assert_array_equal(k(seg)[0], [[9, 1, 1, 3, 3, 3, 9, 7, 7], [-1, 3, 3, 6, 6, 6, -1, 9, 9]])
    expecttest.assert_expected_inline(message(k, seg.astype(np.int16)), """'sequence_bounds': segment_ids must be float32 or int32, got int16 [err_unsupported_dtype]""")


# -- tensor_copy_predicated ---------------------------------------------------------------------------------

def test_tensor_copy_predicated_tile_and_scalar_sources() -> None:
    @nki.jit
    def k(src, dst0, pred):
        s, d, p = load(src), load(dst0), load(pred)
        nisa.tensor_copy_predicated(dst=d, src=s, predicate=p)
        e = load(dst0)
        nisa.tensor_copy_predicated(dst=e, src=9.0, predicate=p, reverse_pred=True)
        return store(d), store(e)

    src, dst0 = f32(8, 12, seed=1), f32(8, 12, seed=2)
    pred = (np.arange(96).reshape(8, 12) % 5 == 0).astype(np.uint8)
    d, e = k(src, dst0, pred)
    np.testing.assert_array_equal(d, np.where(pred != 0, src, dst0))
    np.testing.assert_array_equal(e, np.where(pred == 0, 9.0, dst0))
    expecttest.assert_expected_inline(message(k, src, dst0, pred.astype(np.int8)), """'tensor_copy_predicated': predicate must be uint8, uint16 or uint32, got int8 [err_unsupported_dtype]""")
    expecttest.assert_expected_inline(message(k, src.astype(np.float16), dst0, pred), """'tensor_copy_predicated': src and dst must share a dtype, got float16 and float32 [err_unsupported_dtype]""")


# -- Scalar engine: activate2 and activation's registers ----------------------------------------------------

def test_activate2_stages_and_reduction(trn3: None) -> None:
    @nki.jit
    def k(x, alpha):
        t, a = load(x), load(alpha)
        g = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        p = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        red = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activate2(dst=g, op=nl.relu, data=t, imm0=2.0, imm1=0.5, op0=nl.multiply, op1=nl.subtract,
                       reverse1=True, reduce_op=nl.maximum, reduce_res=red, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.activate2(dst=p, op=nl.prelu, data=t, imm0=0.0, imm1=0.0, op0=nl.bypass, op1=nl.bypass, relu_param=a)
        return store(g), store(red), store(p)

    x, alpha = f32(8, 16), np.linspace(0.1, 0.8, 8, dtype=np.float32).reshape(8, 1)
    g, red, p = k(x, alpha)
    expected = np.maximum(0.5 - 2 * x, 0)
    np.testing.assert_allclose(g, expected, rtol=1e-6)
    np.testing.assert_allclose(red, expected.max(1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(p, np.where(x >= 0, x, alpha * x), rtol=1e-6)


def test_activate2_rules(trn3: None, monkeypatch: pytest.MonkeyPatch) -> None:
    @nki.jit
    def k(x, op0, op1):
        t = load(x)
        y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.activate2(dst=y, op=nl.exp, data=t, imm0=1.0, imm1=1.0, op0=op0, op1=op1)
        return store(y)

    x = f32(4, 4)
    np.testing.assert_allclose(k(x, nl.add, nl.bypass), np.exp(x + 1), rtol=1e-6)
    expecttest.assert_expected_inline(message(k, x, nl.add, nl.multiply), """'activate2': (op0, op1) must be one of [('add', 'bypass'), ('bypass', 'bypass'), ('multiply', 'add'), ('multiply', 'bypass'), ('multiply', 'subtract'), ('subtract', 'bypass')], got ('add', 'multiply') [err_unsupported_op]""")
    monkeypatch.setenv("NKI_TARGET", "trn2")
    expecttest.assert_expected_inline(message(k, x, nl.add, nl.bypass), """'activate2' needs NeuronCore-v4 or later; the target is trn2 (NeuronCore-v3) [err_unsupported_instruction]""")


def test_activation_accumulates_across_instructions() -> None:
    # activation's reduce_cmd drives the Scalar engine's registers: a row sum of exp over two tiles.
    @nki.jit
    def k(a, b):
        ta, tb = load(a), load(b)
        ea = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        eb = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        r = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=ea, op=nl.exp, data=ta, reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.activation(dst=eb, op=nl.exp, data=tb, reduce_op=nl.add, reduce_res=r,
                        reduce_cmd=nisa.reduce_cmd.reduce)
        return store(r)

    a, b = f32(8, 16, seed=1), f32(8, 16, seed=2)
    np.testing.assert_allclose(k(a, b), np.exp(a).sum(1, keepdims=True) + np.exp(b).sum(1, keepdims=True),
                               rtol=1e-5)


# -- exponential ----------------------------------------------------------------------------------------------

def test_exponential_shift_and_running_sum(trn3: None) -> None:
    @nki.jit
    def k(a, b, mx):
        ta, tb, m = load(a), load(b), load(mx)
        ea = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        eb = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        r = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.exponential(dst=ea, src=ta, max_value=m, reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=1.0)
        nisa.exponential(dst=eb, src=tb, max_value=m, reduce_res=r, reduce_cmd=nisa.reduce_cmd.reduce)
        return store(ea), store(r)

    a, b = f32(8, 16, seed=1), f32(8, 16, seed=2)
    mx = np.maximum(a.max(1, keepdims=True), b.max(1, keepdims=True))
    ea, r = k(a, b, mx)
    np.testing.assert_allclose(ea, np.exp(a - mx), rtol=1e-6)
    np.testing.assert_allclose(r, 1 + np.exp(a - mx).sum(1, keepdims=True) + np.exp(b - mx).sum(1, keepdims=True),
                               rtol=1e-5)


def test_exponential_rules(trn3: None, monkeypatch: pytest.MonkeyPatch) -> None:
    @nki.jit
    def k(a, init):
        t = load(a)
        e = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.exponential(dst=e, src=t, reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_init=init)
        return store(e)

    a = f32(4, 4)
    np.testing.assert_allclose(k(a, 0.0), np.exp(a), rtol=1e-6)
    expecttest.assert_expected_inline(message(k, a, 2.0), """'exponential': reduce_init is only read with reduce_cmd=load_reduce, got reset_reduce [err_invalid_argument]""")
    monkeypatch.setenv("NKI_TARGET", "trn2")
    expecttest.assert_expected_inline(message(k, a, 0.0), """'exponential' needs NeuronCore-v4 or later; the target is trn2 (NeuronCore-v3) [err_unsupported_instruction]""")


# -- dropout and random numbers ----------------------------------------------------------------------------

def test_dropout_extremes_and_rate() -> None:
    @nki.jit
    def k(x, prob):
        t = load(x)
        y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dropout(dst=y, data=t, prob=prob)
        return store(y)

    x = np.abs(f32(64, 256)) + 1
    np.testing.assert_array_equal(k(x, 0.0), x)
    np.testing.assert_array_equal(k(x, 1.0), np.zeros_like(x))
    y = k(x, 0.25)
    assert set(np.unique(y == 0)) == {False, True} and np.all((y == 0) | (y == x))
    assert abs((y == 0).mean() - 0.25) < 0.02


def test_dropout_dtype_rules() -> None:
    @nki.jit
    def k(x, prob):
        t, p = load(x), load(prob)
        y = nl.ndarray(x.shape, dtype=nl.float16, buffer=nl.sbuf)
        nisa.dropout(dst=y, data=t, prob=p)
        return store(y)

    expecttest.assert_expected_inline(message(k, f32(4, 4), np.zeros((4, 1), np.float32)), """'dropout': dst must have data's dtype (float32), got float16 [err_unsupported_dtype]""")


def test_rng_is_reproducible_from_a_seed_and_a_saved_state(trn3: None) -> None:
    @nki.jit
    def k(seed):
        s = load(seed)
        out = nl.ndarray((4, 3, 32), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.set_rng_seed(src_seeds=s)
        nisa.rng(dst=out[:, 0, :])
        nisa.set_rng_seed(src_seeds=s)
        nisa.rng(dst=out[:, 1, :], engine=nisa.engine.vector)
        state = nl.ndarray((4, 6), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rand_get_state(dst=state)                     # GpSimd by default
        g = nl.ndarray((4, 32), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rng(dst=g, engine=nisa.engine.gpsimd)
        nisa.rand_set_state(src_seeds=state)
        nisa.rng(dst=out[:, 2, :], engine=nisa.engine.gpsimd)
        return store(out), store(g)

    out, g = k(np.array([[1234]], np.uint32))
    np.testing.assert_array_equal(out[:, 0], out[:, 1])
    np.testing.assert_array_equal(out[:, 2], g)
    assert len(np.unique(out[:, 0])) == out[:, 0].size   # 32 random bits each
    other, _ = k(np.array([[1235]], np.uint32))
    assert not np.array_equal(other[:, 0], out[:, 0])


def test_rng_truncates_to_the_integer_dtype(trn3: None) -> None:
    @nki.jit
    def k(seed):
        s = load(seed)
        wide = nl.ndarray((2, 16), dtype=nl.uint32, buffer=nl.sbuf)
        narrow = nl.ndarray((2, 16), dtype=nl.int8, buffer=nl.sbuf)
        nisa.set_rng_seed(src_seeds=s)
        nisa.rng(dst=wide)
        nisa.set_rng_seed(src_seeds=s)
        nisa.rng(dst=narrow)
        return store(wide), store(narrow)

    wide, narrow = k(np.array([[7]], np.int32))
    np.testing.assert_array_equal(narrow, (wide & 0xFF).astype(np.uint8).view(np.int8))


def test_rand2_is_uniform_in_its_range(trn3: None) -> None:
    @nki.jit
    def k(lo):
        b = load(lo)
        out = nl.ndarray((lo.shape[0], 4096), dtype=nl.float32, buffer=nl.sbuf)
        nisa.rand2(dst=out, min=b, max=5.0)
        return store(out)

    lo = np.array([[-1.0], [2.0]], np.float32)
    out = k(lo)
    assert np.all(out >= lo) and np.all(out <= 5.0)
    np.testing.assert_allclose(out.mean(axis=1), ((lo + 5) / 2).ravel(), atol=0.1)


def test_random_number_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    @nki.jit
    def k(dtype, engine):
        out = nl.ndarray((2, 8), dtype=dtype, buffer=nl.sbuf)
        nisa.rng(dst=out, engine=engine)
        return store(out)

    @nki.jit
    def state(words):
        out = nl.ndarray((2, words), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.rand_get_state(dst=out, engine=nisa.engine.vector)
        return store(out)

    monkeypatch.setenv("NKI_TARGET", "trn3")
    assert state(24).shape == (2, 24)
    expecttest.assert_expected_inline(message(state, 6), """'rand_get_state': the vector engine's XORWOW state is 24 words per lane, dst has 6 [err_shape_mismatch]""")
    expecttest.assert_expected_inline(message(k, nl.float32, nisa.engine.vector), """'rng': dst must be an integer tile (int8, int16, int32, uint8, uint16, uint32), got float32 [err_unsupported_dtype]""")
    monkeypatch.setenv("NKI_TARGET", "trn1")
    expecttest.assert_expected_inline(message(k, nl.uint32, nisa.engine.gpsimd), """'rng' on the GpSimd engine needs NeuronCore-v3 or later; the target is trn1 (NeuronCore-v2) [err_unsupported_instruction]""")
    expecttest.assert_expected_inline(message(state, 24), """'rand_get_state' needs NeuronCore-v3 or later; the target is trn1 (NeuronCore-v2) [err_unsupported_instruction]""")


# -- surface -------------------------------------------------------------------------------------------

def test_affine_select_takes_aws_argument_order() -> None:
    # AWS: affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op, offset=0).
    @nki.jit
    def k(a):
        t = load(a)
        r = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.affine_select(r, [[-1, a.shape[1]]], 1, t, -1e4, nl.greater_equal)
        return store(r)

    a = f32(8, 8)
    np.testing.assert_array_equal(k(a), np.where(np.tri(8, dtype=bool), a, -1e4))


def test_keywords_are_aws_and_misspelt_ones_are_refused() -> None:
    @nki.jit
    def k(a):
        t = load(a)
        y = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy_predicated(dst=y, src=t, predicate=t, revers_pred=True)
        return store(y)

    with pytest.raises(TypeError, match="revers_pred"):
        k(np.ones((2, 2), np.uint8))


def test_instructions_are_counted_on_their_engines(trn3: None) -> None:
    @nki.jit
    def k(x):
        t = load(x)
        y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.exponential(dst=y, src=t)
        nisa.activate2(dst=y, op=nl.exp, data=t, imm0=1.0, imm1=1.0, op0=nl.bypass, op1=nl.bypass)
        idx = nl.ndarray((x.shape[0], 4), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.memset(dst=idx, value=0)
        g = nl.ndarray((x.shape[0], 4), dtype=x.dtype, buffer=nl.sbuf)
        nisa.nc_n_gather(dst=g, data=t, indices=idx)
        return store(g)

    k(f32(16, 64))
    costs = k.last_result.costs
    assert costs.instructions["exponential"] == 1 and costs.instructions["activate2"] == 1
    assert costs.instructions["nc_n_gather"] == 1
    assert costs.busy_s["gpsimd"] > 0 and costs.busy_s["scalar"] > 0


def test_shared_identity_matrix_is_in_sbuf_in_nki_0_2() -> None:
    # AWS's reference (NKI 0.2+): "Create an identity matrix in SBUF"; the NKI Library feeds it to nc_matmul.
    @nki.jit
    def k(a):
        t = load(a)
        eye = nl.shared_identity_matrix(a.shape[0], dtype=nl.float32)
        acc = nl.ndarray((a.shape[1], a.shape[0]), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=t, moving=eye, is_transpose=True)
        res = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        return store(res)

    a = f32(32, 16)
    np.testing.assert_array_equal(k(a), a.T)
