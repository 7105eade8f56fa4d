"""The rest of nki.language public kernels touch: dtype aliases and their limits, finfo/iinfo."""
from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

import torchneuron_ext.nki.language as new_nl
import torchneuron_ext.nki.legacy as nki
import torchneuron_ext.nki.legacy.language as nl


def test_dtype_aliases_are_their_dtypes() -> None:
    assert nl.fp32 == nl.float32 and nl.bf16 == nl.bfloat16 and nl.fp16 == nl.float16
    assert np.dtype(np.float32) == nl.fp32
    assert np.zeros(2, dtype=nl.fp32).dtype == np.float32
    assert new_nl.fp32 == np.float32


def test_limits() -> None:
    assert nl.fp32.min == np.finfo(np.float32).min
    assert nl.finfo(nl.bfloat16).max == ml_dtypes.finfo(ml_dtypes.bfloat16).max
    assert nl.finfo(nl.float8_e4m3).max == 240
    assert nl.iinfo(nl.int8).min == -128
    with pytest.raises(TypeError, match="use nl.iinfo"):
        nl.finfo(nl.int32)
    with pytest.raises(TypeError, match="use nl.finfo"):
        nl.iinfo(nl.float32)


def test_alias_as_kernel_dtype() -> None:
    # The flash-attention reference fills its running max with nl.fp32.min.
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=nl.fp32, buffer=nl.shared_hbm)
        m = nl.full(a.shape, fill_value=nl.fp32.min, dtype=nl.fp32)
        nl.store(out, nl.maximum(m, nl.load(a)))
        return out

    a = np.full((4, 4), -np.inf, np.float32)
    np.testing.assert_array_equal(k(a), np.full((4, 4), np.finfo(np.float32).min))


def test_unmodelled_names_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchneuron_ext.nki import NKIUnsupportedError, _lang
    monkeypatch.setitem(_lang.UNMODELLED, "future_op", "use nl.copy")
    with pytest.raises(NKIUnsupportedError, match="nl.future_op is not modelled.*use nl.copy"):
        new_nl.future_op
    with pytest.raises(AttributeError, match="has no attribute 'fp33'"):
        nl.fp33


@nki.jit
def _gather_flattened(data, indices):
    out = nl.ndarray(indices.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.gather_flattened(nl.load(data), nl.load(indices), dtype=nl.float32))
    return out


def test_gather_flattened_takes_from_the_flattened_free_axes() -> None:
    # AWS's docstring example: free axes flattened into one row per partition.
    data = np.arange(1, 9, dtype=np.float16).reshape(2, 2, 2)
    indices = np.array([[[0, 1], [1, 3]], [[3, 3], [1, 0]]], dtype=np.uint32)
    np.testing.assert_array_equal(_gather_flattened(data, indices),
                                  [[[1, 2], [2, 4]], [[8, 8], [6, 5]]])
    rng = np.random.default_rng(0)
    data = rng.standard_normal((128, 64)).astype(np.float32)
    indices = rng.integers(0, 64, (128, 10)).astype(np.uint32)
    np.testing.assert_array_equal(_gather_flattened(data, indices), np.take_along_axis(data, indices, axis=1))


def test_gather_flattened_errors() -> None:
    from torchneuron_ext.nki import NKIError
    data = np.zeros((4, 8), np.float32)
    with pytest.raises(NKIError, match=r"indices range \[0, 8\] outside the 8 elements.*err_tensor_access_out_of_bound"):
        _gather_flattened(data, np.array([[0, 8]] * 4, np.uint32))
    with pytest.raises(NKIError, match="indices must be uint32, got int32"):
        _gather_flattened(data, np.zeros((4, 2), np.int32))


def test_fp8_e5m2_tensors_take_strided_views() -> None:
    # numpy cannot rebuild a strided view of ml_dtypes' 1-byte floats from its array interface ('<f1'); AWS's
    # double-row matmul example views its HBM inputs as float8_e5m2 and loads them through mgrid.
    @nki.jit
    def k(a):
        out = nl.ndarray((4, 2, 3), dtype=nl.float32, buffer=nl.shared_hbm)
        i = nl.mgrid[0:4, 0:2, 0:3]
        t = nl.ndarray((4, 2, 3), dtype=nl.float8_e5m2, buffer=nl.sbuf)
        t[i.p, i.x, i.y] = nl.load(a.view(nl.float8_e5m2)[i.p, i.x, i.y])
        nl.store(out, nl.copy(t, dtype=nl.float32))
        return out

    a = (np.arange(24).reshape(4, 2, 3) % 5).astype(ml_dtypes.float8_e5m2)
    np.testing.assert_array_equal(k(a.view(np.uint8)), a.astype(np.float32))


# ---------------------------------------------------------------------------------------------------------
# NKI 0.5+ names of the 2026-08 reference (tests/nki/test_documented_names.py walks them all)
# ---------------------------------------------------------------------------------------------------------

def _new_kernel(body):
    import torchneuron_ext.nki as new_nki
    import torchneuron_ext.nki.isa as nisa

    @new_nki.jit
    def k(x):
        t = new_nl.ndarray(x.shape, dtype=x.dtype, buffer=new_nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        r = body(t, nisa)
        out = new_nl.ndarray(r.shape, dtype=r.dtype, buffer=new_nl.shared_hbm)
        nisa.dma_copy(dst=out, src=r)
        return out
    return k


def test_gelu_apprx_sigmoid_dx_is_the_derivative() -> None:
    x = np.linspace(-12, 12, 128 * 64, dtype=np.float32).reshape(128, 64)
    got = _new_kernel(lambda t, nisa: new_nl.gelu_apprx_sigmoid_dx(t))(x)
    s = 1 / (1 + np.exp(-1.702 * x.astype(np.float64)))
    np.testing.assert_allclose(got, s * (1 + 1.702 * x * (1 - s)), rtol=1e-5, atol=1e-6)


def test_average_is_the_mean_operator_of_reductions() -> None:
    def across_partitions(t, nisa):
        dst = new_nl.ndarray((1, t.shape[1]), dtype=new_nl.float32, buffer=new_nl.sbuf)
        nisa.tensor_partition_reduce(dst=dst, op=new_nl.average, data=t)
        return dst

    def along_free(t, nisa):
        dst = new_nl.ndarray((t.shape[0], 1), dtype=new_nl.float32, buffer=new_nl.sbuf)
        nisa.tensor_reduce(dst=dst, op=new_nl.average, data=t, axis=1)
        return dst

    x = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    np.testing.assert_allclose(_new_kernel(across_partitions)(x), x.mean(axis=0, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(_new_kernel(along_free)(x), x.mean(axis=1, keepdims=True), rtol=1e-5)
    with pytest.raises(TypeError, match="nl.average is an operator"):
        new_nl.average(x)


def test_memory_predicates_and_region() -> None:
    seen = {}

    def body(t, nisa):
        p = new_nl.ndarray(t.shape, dtype=new_nl.float32, buffer=new_nl.psum)
        seen.update(tensor=isinstance(t, new_nl.NkiTensor), sbuf=new_nl.is_sbuf(t.buffer),
                    on_chip=new_nl.is_on_chip(p.buffer), psum=new_nl.is_psum(p.buffer),
                    hbm=[new_nl.is_hbm(b) for b in new_nl.MemoryRegion])
        with new_nl.no_reorder():  # program order is the simulator's only order
            r = new_nl.copy(x=t)
        return r

    x = np.ones((4, 4), dtype=np.float32)
    np.testing.assert_array_equal(_new_kernel(body)(x), x)
    assert seen == {"tensor": True, "sbuf": True, "on_chip": True, "psum": True,
                    "hbm": [False, False, True, True]}
    assert new_nl.MemoryRegion("psum") is new_nl.psum and isinstance(new_nl.shared_hbm, new_nl.MemoryRegion)
    with pytest.raises(TypeError, match="takes a memory"):
        new_nl.is_sbuf("sbuf")


def test_broadcast_to_and_rms_norm_take_the_new_keywords() -> None:
    x = np.random.default_rng(1).standard_normal((1, 8)).astype(np.float32)
    got = _new_kernel(lambda t, nisa: new_nl.broadcast_to(x=t, shape=(4, 8), dtype=new_nl.bfloat16))(x)
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.astype(np.float32), np.repeat(x.astype(ml_dtypes.bfloat16), 4, 0)
                                  .astype(np.float32))

    y = np.random.default_rng(2).standard_normal((4, 8)).astype(np.float32)
    w = np.ones((4, 8), dtype=np.float32)

    def norm(compute_dtype):
        def body(t, nisa):
            wt = new_nl.full((4, 8), 1.0, dtype=new_nl.float32, buffer=new_nl.sbuf)
            return new_nl.rms_norm(t, wt, axis=1, n=8, compute_dtype=compute_dtype)
        return body

    ref = y / np.sqrt((y * y).mean(axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(_new_kernel(norm(None))(y), ref, rtol=1e-5)
    coarse = _new_kernel(norm(new_nl.bfloat16))(y)
    np.testing.assert_allclose(coarse, ref, rtol=2e-2)  # intermediates rounded to bfloat16
    assert not np.array_equal(coarse, _new_kernel(norm(None))(y))


def test_the_new_dialect_refuses_the_legacy_mask_by_name() -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    with pytest.raises(TypeError, match=r"nl.exp\(\) got an unexpected keyword argument 'mask'"):
        _new_kernel(lambda t, nisa: new_nl.exp(t, mask=None))(x)
    np.testing.assert_allclose(_new_kernel(lambda t, nisa: new_nl.exp(t))(x), np.exp(x), rtol=1e-6)
    assert "mask" not in inspect.signature(new_nl.exp).parameters
    assert "mask" in inspect.signature(nl.exp).parameters  # the legacy dialect keeps it
