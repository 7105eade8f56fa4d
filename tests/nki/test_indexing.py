"""Indexing as the toolchain defines it: integer indices keep tiles 2-D, 1-D HBM loads land on partitions,
reductions take any free axes (kernels in the style of AWS's tutorials, checked against numpy)."""
from __future__ import annotations

from unittest import mock

import numpy as np
import pytest

import torchneuron_ext.nki.legacy as nki
import torchneuron_ext.nki.legacy.isa as nisa
import torchneuron_ext.nki.legacy.language as nl
from torchneuron_ext.nki import NKIError
from torchneuron_ext.nki import tensor as nki_tensor


def f32(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def test_integer_index_on_a_free_axis_keeps_a_column() -> None:
    # bn_aggr's (P, 2) result: [:, 0] is the mean as a (P, 1) tile, stored into a (P, 1) output.
    @nki.jit
    def mean_of_rows(a):
        mean = nl.ndarray((a.shape[0], 1), dtype=a.dtype, buffer=nl.shared_hbm)
        stats = nisa.bn_aggr(nisa.bn_stats(nl.load(a)))
        m = stats[:, 0]
        assert m.shape == (a.shape[0], 1)
        nl.store(mean, m)
        return mean

    a = f32(128, 64)
    np.testing.assert_allclose(mean_of_rows(a), a.mean(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_integer_index_on_hbm_gives_a_per_partition_scalar() -> None:
    # A[c0:c0+128, j] as the Mamba tutorial loads it: a (128, 1) column that scales each partition.
    @nki.jit
    def scale_rows(x, a):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for j in nl.affine_range(a.shape[1]):
            col = nl.load(a[0:128, j])
            assert col.shape == (128, 1)
            nl.store(out[j], nl.multiply(nl.load(x[j]), col))
        return out

    x, a = f32(3, 128, 16), f32(128, 3)
    np.testing.assert_allclose(scale_rows(x, a), x * a.T[:, :, None], rtol=1e-6)


def test_integer_index_on_the_first_axis_gives_a_row() -> None:
    @nki.jit
    def second_row(x):
        out = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
        row = nl.load(x[1, 0:x.shape[1]])
        assert row.shape == (1, x.shape[1])
        nl.store(out, row)
        return out

    x = f32(4, 32)
    np.testing.assert_array_equal(second_row(x), x[1:2])


def test_one_dimensional_load_lands_on_partitions() -> None:
    # Issue 19: the legacy dialect rejected nl.load(x[0:128]) of a 1-D tensor; the toolchain accepts it.
    @nki.jit
    def plus_one(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x[0:128])
        assert t.shape == (128, 1)
        nl.store(out[0:128], nl.add(t, 1.0))
        return out

    x = f32(128)
    np.testing.assert_allclose(plus_one(x), x + 1)


def test_scalar_load_is_a_one_by_one_tile() -> None:
    @nki.jit
    def first(x):
        out = nl.ndarray((1, 1), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x[0]))
        return out

    x = f32(4)
    np.testing.assert_array_equal(first(x), x[:1].reshape(1, 1))


def test_store_of_a_mismatched_shape_is_a_clear_error() -> None:
    @nki.jit
    def bad(x):
        out = nl.ndarray((128,), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out[0:64], nl.load(x))
        return out

    with pytest.raises(NKIError) as info:
        bad(f32(128, 1))
    assert info.value.code == "err_store_dst_shape_smaller_than_other_shape"


def test_reduction_over_non_contiguous_free_axes() -> None:
    # 2x2 average pooling: the window axes (2, 4) of a (C, H, 2, W, 2) view are reduced in one nl.sum.
    @nki.jit
    def avgpool(x):
        c, h, w = x.shape
        out = nl.ndarray((c, h // 2, w // 2), dtype=x.dtype, buffer=nl.shared_hbm)
        ix, iy, ip, iz, iq = nl.mgrid[0:c, 0:h // 2, 0:2, 0:w // 2, 0:2]
        t = nl.load(x[ix, iy * 2 + ip, iz * 2 + iq])
        nl.store(out, nl.sum(t, axis=[2, 4]) / 4)
        return out

    x = f32(4, 6, 8)
    np.testing.assert_allclose(avgpool(x), x.reshape(4, 3, 2, 4, 2).mean(axis=(2, 4)), rtol=1e-5, atol=1e-6)


def test_reduction_axis_out_of_range_is_an_error() -> None:
    @nki.jit
    def bad(x):
        return nl.sum(nl.load(x), axis=3)

    with pytest.raises(NKIError) as info:
        bad(f32(4, 4))
    assert info.value.code == "err_unsupported_reduce_axis"


# Plain int/slice keys skip NKITensor.__getitem__'s resolving and normalising (tensor._plain_key); every other
# key takes it. Both must give
# the same view (elements, shape, partition axis) and the same errors, in either dialect.
_PLAIN_KEYS = [
    (slice(0, 128), 1, slice(0, 8)), (slice(None), 0, slice(None)), (slice(2, 100, 3), 2, slice(1, 7)),
    (slice(0, 128), slice(1, 3)), (5,), 5, (5, 2), (5, 2, 3), (slice(-8, None), -1, slice(None, -2)),
    slice(0, 64), (slice(0, 128), 1, slice(4, 12)),  # the last runs past its axis: checked at the access
    (128,), (slice(0, 128), 4), (slice(0, 128), 1, slice(9, 12)), (0, 0, 0, 0), (slice(0, 8, -1),), (-129,),
]


def _general(t, key):
    """t[key] with the fast path off: every key resolved and normalised first."""
    with mock.patch.object(nki_tensor, "_plain_key", lambda key, ndim: None):
        return t[key]


def _agree(t, key) -> bool:
    """t[key] as the general path has it, view or error; whether it was an error."""
    try:
        general = _general(t, key)
    except NKIError as e:
        with pytest.raises(NKIError) as fast:
            t[key]
        assert (fast.value.code, fast.value.message) == (e.code, e.message)
        return True
    fast = t[key]
    assert fast.shape == general.shape and fast.par_axis == general.par_axis
    assert (fast.index is None) == (general.index is None)
    if fast.index is None:
        assert fast.arr.__array_interface__ == general.arr.__array_interface__
    else:
        assert all(np.array_equal(a, b) for a, b in zip(fast.index, general.index))
    return False


@pytest.mark.parametrize("dialect", ["new", "legacy"])
def test_plain_int_and_slice_keys_index_as_the_general_path(dialect: str) -> None:
    import torchneuron_ext.nki as nki_new
    import torchneuron_ext.nki.language as nl_new
    jit, lang = (nki_new.jit, nl_new) if dialect == "new" else (nki.jit, nl)
    errors = []

    @jit
    def kernel(x):
        out = lang.ndarray((128, 8), dtype=x.dtype, buffer=lang.shared_hbm)
        tile = lang.ndarray((128, 4, 8), dtype=x.dtype, buffer=lang.sbuf)
        flat = lang.ndarray((128, 8), dtype=x.dtype, buffer=lang.sbuf)
        for t in (tile, flat, x):
            errors.extend(_agree(t, key) for key in _PLAIN_KEYS)
        # What is not a plain int or slice takes the general path, to the same view as its plain spelling.
        assert tile[np.int64(1), 2].arr.__array_interface__ == tile[1, 2].arr.__array_interface__
        assert tile[..., 3].arr.__array_interface__ == tile[:, :, 3].arr.__array_interface__
        if dialect == "legacy":
            lang.store(out, lang.load(x[:, 0, :]))
        else:
            nki_new.isa.dma_copy(dst=out, src=x[:, 0, :])
        return out

    x = f32(128, 4, 8)
    np.testing.assert_array_equal(kernel(x), x[:, 0, :])
    assert 0 < sum(errors) < len(errors)  # both outcomes were compared
