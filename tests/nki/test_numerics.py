"""NKI numerics in both dialects (issue 6, point 3).

Engines compute in fp32 and cast once to the output dtype; bf16 and fp8 round as ml_dtypes does;
output dtypes follow NKI's promotion rules, with Python scalars as int32/fp32/uint8; reductions keep
the partition dimension; masks limit loads, stores and compute, and masked-out indices may lie out
of bounds; PSUM accumulates as each dialect defines; all instances of a grid share shared_hbm.
"""
from __future__ import annotations

import expecttest
import ml_dtypes
import numpy as np
import pytest
import torch

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
import torchneuron_ext.nki.legacy as lnki
import torchneuron_ext.nki.legacy.isa as lnisa
import torchneuron_ext.nki.legacy.language as lnl
from torchneuron_ext.nki import NKIError
from torchneuron_ext.nki.dtypes import name as dtype_name

BF16, E4M3, E5M2 = np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float8_e4m3), np.dtype(ml_dtypes.float8_e5m2)


# Plain functions the kernels below call (they are traced into the kernel): the moves between HBM and
# on-chip tiles around the instructions a kernel is about.

def _store_legacy(t):
    """The tile t in a new shared_hbm tensor of its shape and dtype."""
    out = lnl.ndarray(t.shape, dtype=t.dtype, buffer=lnl.shared_hbm)
    lnl.store(out, value=t)
    return out


def _load_new(a):
    """The HBM tensor a copied into an SBUF tile of its shape and dtype."""
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    return t


def _store_new(t):
    """The tile t copied into a new shared_hbm tensor of its shape and dtype."""
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


# ---------------------------------------------------------------------------------------------------------
# output dtypes: promotion and weak scalars
# ---------------------------------------------------------------------------------------------------------

@lnki.jit
def _add_tiles_legacy(a, b):
    r = lnl.add(lnl.load(a), lnl.load(b))
    return _store_legacy(r)


@nki.jit
def _add_tiles_new(a, b):
    r = nl.add(_load_new(a), _load_new(b))
    return _store_new(r)


@lnki.jit
def _add_scalar_legacy(a, scalar):
    r = lnl.load(a) + scalar
    return _store_legacy(r)


PAIRS = [(np.float32, np.float32), (np.float16, np.float32), (np.float16, BF16), (BF16, np.float32),
         (E4M3, E5M2), (E4M3, np.float16), (E5M2, BF16), (np.int8, np.uint8), (np.int8, np.int16),
         (np.uint8, np.int16), (np.uint16, np.int16), (np.int32, np.uint32), (np.int32, np.float16),
         (np.uint8, BF16), (np.bool_, np.int8)]
SCALARS = [(np.float16, 1.2), (np.float16, 1), (BF16, 2.0), (np.float32, 3), (np.int8, 1), (np.int8, 1.0),
           (np.int32, 1.5), (np.uint8, True), (np.int16, True), (E4M3, 1)]


class TestOutputDtypes(expecttest.TestCase):
    def test_tile_tile_promotion_table(self) -> None:
        lines = []
        for a, b in PAIRS:
            x, y = np.ones((2, 3), a), np.ones((2, 3), b)
            legacy, new = _add_tiles_legacy(x, y), _add_tiles_new(x, y)
            assert legacy.dtype == new.dtype, (a, b, legacy.dtype, new.dtype)
            lines.append(f"{dtype_name(a):>11} + {dtype_name(b):<11} -> {dtype_name(legacy.dtype)}")
        self.assertExpectedInline("\n".join(lines), """\
    float32 + float32     -> float32
    float16 + float32     -> float32
    float16 + bfloat16    -> float32
   bfloat16 + float32     -> float32
float8_e4m3 + float8_e5m2 -> bfloat16
float8_e4m3 + float16     -> float16
float8_e5m2 + bfloat16    -> bfloat16
       int8 + uint8       -> int16
       int8 + int16       -> int16
      uint8 + int16       -> int16
     uint16 + int16       -> int32
      int32 + uint32      -> float32
      int32 + float16     -> float16
      uint8 + bfloat16    -> bfloat16
       bool + int8        -> int8""")

    def test_python_scalars_are_int32_fp32_uint8(self) -> None:
        lines = []
        for a, s in SCALARS:
            out = _add_scalar_legacy(np.ones((2, 3), a), s)
            lines.append(f"{dtype_name(a):>11} + {s!r:<5} -> {dtype_name(out.dtype)}")
        self.assertExpectedInline("\n".join(lines), """\
    float16 + 1.2   -> float32
    float16 + 1     -> float16
   bfloat16 + 2.0   -> float32
    float32 + 3     -> float32
       int8 + 1     -> int32
       int8 + 1.0   -> float32
      int32 + 1.5   -> float32
      uint8 + True  -> uint8
      int16 + True  -> int16
float8_e4m3 + 1     -> float8_e4m3""")

    def test_weak_scalar_value_is_computed_in_fp32(self) -> None:
        # fp16 + 1.2 gives fp32 2.2, not fp16's 2.2 (1.2 is not an fp16: fp16(1.2) = 1.2001953).
        out = _add_scalar_legacy(np.ones((2, 3), np.float16), 1.2)
        assert out.dtype == np.float32 and (out == np.float32(1.0) + np.float32(1.2)).all()
        out = _add_scalar_legacy(np.full((1, 2), 100, np.int8), 100)  # int32: no int8 wrap-around
        assert out.dtype == np.int32 and (out == 200).all()

    def test_explicit_dtype_wins(self) -> None:
        @lnki.jit
        def k(a):
            r = lnl.multiply(lnl.load(a), 0.5, dtype=lnl.bfloat16)
            return _store_legacy(r)
        out = k(np.full((2, 2), 3, np.int32))
        assert out.dtype == BF16 and (out.astype(np.float32) == 1.5).all()


# ---------------------------------------------------------------------------------------------------------
# low precision: fp32 compute, one rounding, ml_dtypes' round-to-nearest-even
# ---------------------------------------------------------------------------------------------------------

def _rounding_probe() -> np.ndarray:
    """fp32 values that exercise rounding: exact ties, near-ties, tiny, huge, inf and nan."""
    one = np.float32(1)
    ties = [one + 2.0 ** -8, one + 3 * 2.0 ** -8, one + 2.0 ** -4, one + 3 * 2.0 ** -4, 2 + 2.0 ** -3, 2 + 3 * 2.0 ** -3]
    near = [one + 2.0 ** -8 + 2.0 ** -20, one + 2.0 ** -8 - 2.0 ** -20]
    special = [0.0, -0.0, 1e-30, -1e-30, 3e-39, 1e4, 60000.0, 1e30, -1e30, np.inf, -np.inf, np.nan, 448.0, 464.0]
    rng = np.random.default_rng(0)
    rand = rng.standard_normal(100) * np.logspace(-6, 6, 100)
    vals = np.concatenate([np.array(ties + near + special), -np.array(ties), rand]).astype(np.float32)
    return np.resize(vals, (4, 32)).astype(np.float32)


@lnki.jit
def _cast_legacy(a, dtype):
    t = lnl.copy(lnl.load(a), dtype=dtype)
    return _store_legacy(t)


@nki.jit
def _cast_new(a, dtype):
    t = _load_new(a)
    r = nl.ndarray(a.shape, dtype=dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=t)
    return _store_new(r)


@pytest.mark.parametrize("dtype", [BF16, E4M3, E5M2, np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(np.float16)],
                         ids=dtype_name)
@pytest.mark.parametrize("kernel", [_cast_legacy, _cast_new], ids=["legacy", "new"])
def test_cast_rounds_like_ml_dtypes(kernel, dtype: np.dtype) -> None:
    x = _rounding_probe()
    out = kernel(x, dtype)
    with np.errstate(over="ignore"):  # fp16 overflows to inf, as intended
        expected = x.astype(dtype)
    assert out.dtype == dtype
    # Bit-exact, NaN included.
    np.testing.assert_array_equal(out.view(np.uint8), expected.view(np.uint8))


def test_bf16_cast_matches_torch() -> None:
    x = torch.from_numpy(_rounding_probe())
    out = _cast_legacy(x, torch.bfloat16)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, x.bfloat16(), atol=0, rtol=0, equal_nan=True)


def test_bf16_ties_round_to_even() -> None:
    x = np.array([[1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8)]], np.float32)
    out = _cast_legacy(x, BF16).astype(np.float32)
    np.testing.assert_array_equal(out, [[1.0, 1 + 2 ** -6, -1.0]])


@lnki.jit
def _times3_minus3_legacy(a):
    r = lnisa.tensor_scalar(lnl.load(a), np.multiply, 3.0, op1=np.subtract, operand1=3.0)
    return _store_legacy(r)


@nki.jit
def _times3_minus3_new(a):
    t = _load_new(a)
    r = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=r, data=t, op0=nl.multiply, operand0=3.0, op1=nl.subtract, operand1=3.0)
    return _store_new(r)


@pytest.mark.parametrize("kernel", [_times3_minus3_legacy, _times3_minus3_new], ids=["legacy", "new"])
def test_engines_compute_in_fp32_and_round_once(kernel) -> None:
    # x = 1 + 2^-7 in bf16. In fp32, 3x - 3 = 0.0234375, a bf16. Rounding 3x to bf16 first would give
    # 3.03125 (a tie, to even) and then 0.03125.
    x = np.full((2, 4), 1 + 2 ** -7, BF16)
    out = kernel(x)
    assert out.dtype == BF16
    np.testing.assert_array_equal(out.astype(np.float32), np.full((2, 4), 0.0234375, np.float32))


def test_bf16_transcendentals_are_fp32_then_rounded() -> None:
    @lnki.jit
    def k(a):
        r = lnl.exp(lnl.load(a))
        return _store_legacy(r)
    x = (np.random.default_rng(1).standard_normal((8, 16)) * 3).astype(BF16)
    out = k(x)
    assert out.dtype == BF16
    expected = np.exp(x.astype(np.float32)).astype(BF16)
    np.testing.assert_array_equal(out.view(np.uint16), expected.view(np.uint16))


def test_load_with_dtype_converts() -> None:
    @lnki.jit
    def k(a):
        t = lnl.load(a, dtype=lnl.float8_e4m3)
        return _store_legacy(t)
    x = _rounding_probe()
    out = k(x)
    np.testing.assert_array_equal(out.view(np.uint8), x.astype(E4M3).view(np.uint8))


# ---------------------------------------------------------------------------------------------------------
# reductions keep the partition dimension
# ---------------------------------------------------------------------------------------------------------

def test_reductions_give_p_by_1() -> None:
    shapes = {}

    @lnki.jit
    def k(a, b):
        t = lnl.load(a)            # (128, 64)
        t3 = lnl.load(b)           # (16, 4, 8)
        shapes["sum"] = lnl.sum(t, axis=1).shape
        shapes["max [1]"] = lnl.max(t, axis=[1]).shape
        shapes["mean 3-d [1, 2]"] = lnl.mean(t3, axis=[1, 2]).shape
        shapes["sum 3-d [2]"] = lnl.sum(t3, axis=2).shape
        shapes["sum keepdims 3-d"] = lnl.sum(t3, axis=[1, 2], keepdims=True).shape
        shapes["tensor_reduce"] = lnisa.tensor_reduce(np.add, t, axis=[1]).shape
        centered = t - lnl.mean(t, axis=1)  # (128, 64) - (128, 1) broadcasts along the free axis
        return _store_legacy(centered)

    a = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
    out = k(a, np.ones((16, 4, 8), np.float32))
    assert shapes == {"sum": (128, 1), "max [1]": (128, 1), "mean 3-d [1, 2]": (16, 1), "sum 3-d [2]": (16, 4),
                      "sum keepdims 3-d": (16, 1, 1), "tensor_reduce": (128, 1)}
    np.testing.assert_allclose(out, a - a.mean(axis=1, keepdims=True), atol=1e-6)


def test_new_dialect_tensor_reduce_into_p_by_1() -> None:
    @nki.jit
    def k(a):
        t = _load_new(a)
        r = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=r, op=nl.add, data=t, axis=1)
        return _store_new(r)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(k(a), a.sum(axis=1, keepdims=True))


def test_integer_mean_is_fp32() -> None:
    @lnki.jit
    def k(a):
        r = lnl.mean(lnl.load(a), axis=1)
        return _store_legacy(r)
    out = k(np.array([[1, 2], [3, 6]], np.int32))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [[1.5], [4.5]])


def test_partition_axis_cannot_be_reduced() -> None:
    @lnki.jit
    def k(a):
        return lnl.sum(lnl.load(a), axis=0)
    with pytest.raises(NKIError) as info:
        k(np.ones((4, 4), np.float32))
    assert info.value.code == "err_unsupported_reduce_axis"


# ---------------------------------------------------------------------------------------------------------
# masks (legacy)
# ---------------------------------------------------------------------------------------------------------

@lnki.jit
def _masked_copy(x, out, rows_ok, cols_ok):
    """Outputs passed in: copy the masked part of a 128 x 8 window of x into out."""
    i_p, i_f = lnl.mgrid[0:128, 0:8]
    mask = (i_p < rows_ok) & (i_f < cols_ok)
    t = lnl.load(x[i_p, i_f], mask=mask)
    lnl.store(out[i_p, i_f], value=t, mask=mask)


def test_masked_store_writes_only_masked_positions() -> None:
    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    out = np.full((128, 8), -1, np.float32)
    _masked_copy(x, out, 100, 5)
    expected = np.full((128, 8), -1, np.float32)
    expected[:100, :5] = x[:100, :5]
    np.testing.assert_array_equal(out, expected)


def test_masked_out_indices_may_be_out_of_bounds() -> None:
    # The window is 128 x 8 but the tensors are 100 x 5: only masked-out indices fall outside.
    x = np.arange(100 * 5, dtype=np.float32).reshape(100, 5)
    out = np.zeros((100, 5), np.float32)
    _masked_copy(x, out, 100, 5)
    np.testing.assert_array_equal(out, x)


def test_masked_in_out_of_bounds_is_an_error() -> None:
    x, out = np.zeros((100, 5), np.float32), np.zeros((100, 5), np.float32)
    with pytest.raises(NKIError) as info:
        _masked_copy(x, out, 110, 5)  # rows 100..109 are masked in but do not exist
    assert info.value.code == "err_tensor_access_out_of_bound"
    assert "index range [0, 109] exceed dimension size of 100" in str(info.value)


def test_masked_compute_and_reduction_ignore_masked_out_lanes() -> None:
    @lnki.jit
    def k(x):
        i_p, i_f = lnl.mgrid[0:4, 0:8]
        valid = i_f < x.shape[1]
        t = lnl.load(x[i_p, i_f], mask=valid)          # columns 5..7 are undefined
        e = lnl.exp(t, mask=valid)
        s = lnl.sum(e, axis=1, mask=valid)             # (4, 1), over the 5 real columns only
        out = lnl.ndarray((4, 1), dtype=lnl.float32, buffer=lnl.shared_hbm)
        lnl.store(out, value=s)
        return out
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    np.testing.assert_allclose(k(x), np.exp(x).sum(axis=1, keepdims=True), rtol=1e-6)


def test_unmasked_reduction_sees_undefined_lanes() -> None:
    # The same kernel without the reduction mask sums the undefined columns: the simulator makes them
    # NaN so the bug shows instead of passing by luck.
    @lnki.jit
    def k(x):
        i_p, i_f = lnl.mgrid[0:4, 0:8]
        t = lnl.load(x[i_p, i_f], mask=(i_f < x.shape[1]))
        s = lnl.sum(t, axis=1)
        out = lnl.ndarray((4, 1), dtype=lnl.float32, buffer=lnl.shared_hbm)
        lnl.store(out, value=s)
        return out
    assert np.isnan(k(np.ones((4, 5), np.float32))).all()


def test_mask_combined_with_python_and_is_an_error() -> None:
    @lnki.jit
    def k(x):
        i_p, i_f = lnl.mgrid[0:4, 0:4]
        return lnl.load(x[i_p, i_f], mask=(i_p < 2) and (i_f < 2))
    with pytest.raises(TypeError, match="combine masks with '&'"):
        k(np.ones((4, 4), np.float32))


# ---------------------------------------------------------------------------------------------------------
# PSUM accumulation
# ---------------------------------------------------------------------------------------------------------

A = np.arange(8, dtype=np.float32).reshape(2, 4)        # stationary [K=2, M=4]
B = np.arange(6, dtype=np.float32).reshape(2, 3) - 2    # moving [K=2, N=3]
AB = A.T @ B


def _store_psum_legacy(acc):
    out = lnl.ndarray(acc.shape, dtype=lnl.float32, buffer=lnl.shared_hbm)
    lnl.store(out, value=lnl.copy(acc))
    return out


def test_legacy_psum_plus_equals_accumulates() -> None:
    @lnki.jit
    def k(a, b):
        ta, tb = lnl.load(a), lnl.load(b)
        acc = lnl.zeros((4, 3), dtype=lnl.float32, buffer=lnl.psum)
        for _ in lnl.affine_range(3):
            acc += lnisa.nc_matmul(ta, tb)
        return _store_psum_legacy(acc)
    np.testing.assert_array_equal(k(A, B), 3 * AB)


def test_legacy_psum_indexed_plus_equals_and_assignment() -> None:
    @lnki.jit
    def k(a, b):
        ta, tb = lnl.load(a), lnl.load(b)
        acc = lnl.zeros((4, 3), dtype=lnl.float32, buffer=lnl.psum)
        acc[...] += lnl.matmul(ta, tb, transpose_x=True)
        acc[...] += lnl.matmul(ta, tb, transpose_x=True)
        twice = lnl.copy(acc)
        acc[...] = lnisa.nc_matmul(ta, tb)  # plain assignment overwrites
        return _store_psum_legacy(twice), _store_psum_legacy(acc)
    twice, once = k(A, B)
    np.testing.assert_array_equal(twice, 2 * AB)
    np.testing.assert_array_equal(once, AB)


def test_legacy_matmul_result_is_fp32_psum_even_for_bf16() -> None:
    seen = {}

    @lnki.jit
    def k(a, b):
        r = lnisa.nc_matmul(lnl.load(a), lnl.load(b))
        seen["dtype"], seen["buffer"] = r.dtype, r.buffer
        return _store_psum_legacy(r)
    out = k(A.astype(BF16), B.astype(BF16))
    assert seen == {"dtype": np.float32, "buffer": lnl.psum}
    np.testing.assert_array_equal(out, AB)


def test_legacy_sbuf_plus_equals_is_a_plain_add() -> None:
    @lnki.jit
    def k(a):
        t = lnl.load(a)
        t += t
        t += 1.0
        return _store_legacy(t)
    np.testing.assert_array_equal(k(A), 2 * A + 1)


def _new_psum_kernel(body):
    @nki.jit
    def k(a, b):
        ta, tb = _load_new(a), _load_new(b)
        acc = nl.ndarray((4, 3), dtype=nl.float32, buffer=nl.psum)
        body(acc, ta, tb)
        sb = nl.ndarray((4, 3), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=acc)
        return _store_new(sb)
    return k(A, B)


def test_new_first_matmul_overwrites_then_accumulates() -> None:
    def body(acc, ta, tb):
        for _ in range(3):
            nisa.nc_matmul(dst=acc, stationary=ta, moving=tb)
    np.testing.assert_array_equal(_new_psum_kernel(body), 3 * AB)  # no NaN from the fresh PSUM tile


def test_new_accumulate_false_overwrites_and_true_adds() -> None:
    def overwrite(acc, ta, tb):
        nisa.nc_matmul(dst=acc, stationary=ta, moving=tb)
        nisa.nc_matmul(dst=acc, stationary=ta, moving=tb, accumulate=False)

    def add_to_memset(acc, ta, tb):
        nisa.memset(dst=acc, value=10.0)
        nisa.nc_matmul(dst=acc, stationary=ta, moving=tb, accumulate=True)
    np.testing.assert_array_equal(_new_psum_kernel(overwrite), AB)
    np.testing.assert_array_equal(_new_psum_kernel(add_to_memset), AB + 10)


def test_new_non_matmul_write_restarts_accumulation() -> None:
    def body(acc, ta, tb):
        nisa.nc_matmul(dst=acc, stationary=ta, moving=tb)
        nisa.memset(dst=acc, value=7.0)
        nisa.nc_matmul(dst=acc, stationary=ta, moving=tb)  # first matmul write since the memset
    np.testing.assert_array_equal(_new_psum_kernel(body), AB)


def test_new_overwrite_is_tracked_per_element() -> None:
    def body(acc, ta, tb):
        nisa.nc_matmul(dst=acc[:, 0:2], stationary=ta, moving=tb[:, 0:2])
        nisa.nc_matmul(dst=acc, stationary=ta, moving=tb)  # columns 0-1 accumulate, column 2 is new
    expected = AB.copy()
    expected[:, 0:2] *= 2
    np.testing.assert_array_equal(_new_psum_kernel(body), expected)


def test_new_matmul_writes_only_psum() -> None:
    @nki.jit
    def k(a, b):
        ta = _load_new(a)
        tb = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tb, src=b)
        wrong = nl.ndarray((4, 3), dtype=nl.float32, buffer=nl.sbuf)
        nisa.nc_matmul(dst=wrong, stationary=ta, moving=tb)
    with pytest.raises(NKIError) as info:
        k(A, B)
    assert info.value.code == "err_unsupported_memory" and "'psum'" in str(info.value)


# ---------------------------------------------------------------------------------------------------------
# shared_hbm across the instances of a grid
# ---------------------------------------------------------------------------------------------------------

@lnki.jit
def _program_ids(n_cols):
    out = lnl.ndarray((lnl.num_programs(0), n_cols), dtype=lnl.int32, buffer=lnl.shared_hbm)
    i, j = lnl.program_id(0), lnl.program_id(1)
    value = lnl.full((1, 1), 10 * i + j + 100 * lnl.num_programs(), dtype=lnl.int32)
    lnl.store(out[i:i + 1, j:j + 1], value=value)
    return out


def test_every_instance_writes_the_same_shared_output() -> None:
    out = _program_ids[3, 4](4)
    expected = 10 * np.arange(3)[:, None] + np.arange(4)[None, :] + 1200
    np.testing.assert_array_equal(out, expected)
    assert _program_ids.last_result.grid == (3, 4)


def test_lnc2_instances_share_shared_hbm() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((2, a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
        pid = nl.program_id(0)
        t = nl.ndarray((1, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[pid:pid + 1, :])
        nisa.dma_copy(dst=out[pid:pid + 1, :], src=t)
        return out
    a = np.arange(10, dtype=np.float32).reshape(2, 5)
    np.testing.assert_array_equal(k[2](a), a)
    assert np.isnan(k[1](a)[1]).all()  # one core: the second row is never written


def test_private_hbm_is_per_instance() -> None:
    @lnki.jit
    def k(a):
        out = lnl.ndarray((2, 4), dtype=lnl.float32, buffer=lnl.shared_hbm)
        scratch = lnl.ndarray((1, 4), dtype=lnl.float32, buffer=lnl.hbm)
        pid = lnl.program_id(0)
        if pid == 0:
            lnl.store(scratch, value=lnl.load(a))
        lnl.store(out[pid:pid + 1, :], value=lnl.load(scratch))
        return out
    out = k[2](np.ones((1, 4), np.float32))
    np.testing.assert_array_equal(out[0], np.ones(4))
    assert np.isnan(out[1]).all()  # instance 1's scratch is its own, never written


def test_instances_must_create_the_same_shared_tensors() -> None:
    @lnki.jit
    def k(a):
        out = lnl.ndarray((lnl.program_id(0) + 1, 4), dtype=lnl.float32, buffer=lnl.shared_hbm)
        return out
    with pytest.raises(NKIError) as info:
        k[2](np.ones((1, 4), np.float32))
    assert info.value.code == "err_shared_hbm_mismatch"


def test_shared_hbm_in_a_loop_is_rejected_on_every_launch() -> None:
    # The kernel's loop lines are parsed once and cached: the second launch must still see them.
    @lnki.jit
    def k(a):
        for _ in lnl.affine_range(1):
            out = lnl.ndarray(a.shape, dtype=a.dtype, buffer=lnl.shared_hbm)
        return out

    for _ in range(2):
        with pytest.raises(NKIError) as info:
            k(np.ones((2, 2), np.float32))
        assert info.value.code == "err_shared_hbm_must_in_kernel_level"
    for _ in range(2):
        assert (_add_scalar_legacy(np.ones((2, 2), np.float32), 1.0) == 2).all()


@pytest.mark.parametrize("scale", [1.0, 2.0, "tile"])
def test_activation_scale_and_bias(scale) -> None:
    @nki.jit
    def k(a, s, b):
        t = _load_new(a)
        st = _load_new(s)
        bt = _load_new(b)
        r = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.activation(dst=r, op=nl.exp, data=t, bias=bt, scale=st if scale == "tile" else scale)
        return _store_new(r)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 6)).astype(np.float32)
    s = rng.standard_normal((4, 1)).astype(np.float32)
    b = rng.standard_normal((4, 1)).astype(np.float32)
    expected = np.exp(a * (s if scale == "tile" else np.float32(scale)) + b)
    np.testing.assert_allclose(k(a, s, b), expected, rtol=1e-6)


# ---------------------------------------------------------------------------------------------------------
# the engines' functions against torch (fp32)
# ---------------------------------------------------------------------------------------------------------

def _run_elementwise(fn, *arrays: np.ndarray) -> np.ndarray:
    @lnki.jit
    def k(*args):
        r = fn(*[lnl.load(a) for a in args])
        return _store_legacy(r)
    return k(*arrays)


_X = np.linspace(-4, 4, 64 * 16, dtype=np.float32).reshape(64, 16)
_POS = np.abs(_X) + 0.1
_F = torch.nn.functional
UNARY_VS_TORCH = {
    "exp": (_X, torch.exp), "log": (_POS, torch.log), "sqrt": (_POS, torch.sqrt), "rsqrt": (_POS, torch.rsqrt),
    "reciprocal": (_POS, torch.reciprocal), "tanh": (_X, torch.tanh), "sigmoid": (_X, torch.sigmoid),
    "relu": (_X, torch.relu), "gelu": (_X, _F.gelu), "gelu_apprx_tanh": (_X, lambda t: _F.gelu(t, approximate="tanh")),
    "gelu_apprx_sigmoid": (_X, lambda t: t * torch.sigmoid(1.702 * t)), "silu": (_X, _F.silu),
    "softplus": (_X, _F.softplus), "mish": (_X, _F.mish), "erf": (_X, torch.erf), "sin": (_X, torch.sin),
    "cos": (_X, torch.cos), "tan": (_X / 3, torch.tan), "arctan": (_X, torch.arctan), "sign": (_X, torch.sign),
    "abs": (_X, torch.abs), "square": (_X, torch.square), "negative": (_X, torch.negative),
    "ceil": (_X, torch.ceil), "floor": (_X, torch.floor), "trunc": (_X, torch.trunc),
}


def _derivative(f):
    def d(t: torch.Tensor) -> torch.Tensor:
        t = t.clone().requires_grad_()
        f(t).sum().backward()
        return t.grad
    return d


UNARY_VS_TORCH.update({"gelu_dx": (_X, _derivative(_F.gelu)), "silu_dx": (_X, _derivative(_F.silu)),
                       "erf_dx": (_X, _derivative(torch.erf))})


@pytest.mark.parametrize("name", sorted(UNARY_VS_TORCH))
def test_unary_functions_match_torch(name: str) -> None:
    x, reference = UNARY_VS_TORCH[name]
    got = _run_elementwise(getattr(lnl, name), x)
    torch.testing.assert_close(torch.from_numpy(got), reference(torch.from_numpy(x)).detach(), atol=1e-5, rtol=1e-5)


_Y = _X[:, ::-1].copy() * 0.75 + 0.05


@pytest.mark.parametrize("name, reference, x", [
    ("add", torch.add, _X), ("subtract", torch.sub, _X), ("multiply", torch.mul, _X), ("divide", torch.div, _X),
    ("maximum", torch.maximum, _X), ("minimum", torch.minimum, _X), ("fmod", torch.fmod, _X),
    ("mod", torch.remainder, _X), ("power", torch.pow, _POS)], ids=lambda v: v if isinstance(v, str) else "")
def test_binary_functions_match_torch(name: str, reference, x: np.ndarray) -> None:
    got = _run_elementwise(getattr(lnl, name), x, _Y)
    torch.testing.assert_close(torch.from_numpy(got), reference(torch.from_numpy(x), torch.from_numpy(_Y)),
                               atol=1e-5, rtol=1e-5)


def test_fused_softmax_and_rms_norm_match_torch() -> None:
    @lnki.jit
    def k(x, w):
        t = lnl.load(x)
        wt = lnl.load(w.reshape((1, w.shape[0]))).broadcast_to(t.shape)
        soft = lnl.ndarray(t.shape, dtype=t.dtype, buffer=lnl.shared_hbm)
        lnl.store(soft, value=lnl.softmax(t, axis=1))
        rms = lnl.ndarray(t.shape, dtype=t.dtype, buffer=lnl.shared_hbm)
        lnl.store(rms, value=lnl.rms_norm(t, wt, axis=1, n=t.shape[1]))
        return soft, rms
    x, w = torch.randn(64, 100), torch.rand(100)
    soft, rms = k(x, w)
    torch.testing.assert_close(soft, torch.softmax(x, -1))
    torch.testing.assert_close(rms, x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w)


@pytest.mark.parametrize("dialect", ["legacy", "new"])
def test_activation_with_nl_copy_is_the_identity(dialect: str) -> None:
    # nisa.activation(op=nl.copy, scale=s) scales (or just moves, e.g. out of PSUM) on the Scalar engine.
    if dialect == "legacy":
        @lnki.jit
        def k(a):
            r = lnisa.activation(op=lnl.copy, data=lnl.load(a), scale=-2.0)
            return _store_legacy(r)
    else:
        @nki.jit
        def k(a):
            t = _load_new(a)
            nisa.activation(dst=t, op=nl.copy, data=t, scale=-2.0)
            return _store_new(t)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(k(a), -2 * a)
