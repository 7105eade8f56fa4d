"""Tile-valued (dynamic) indices and indirect DMA: gathers and scatters through index tiles, bounds checked
at the access, oob_mode=skip, read-modify-write with repeated indices, dynamic offsets."""
from __future__ import annotations

import numpy as np
import pytest

import torchneuron_ext.nki.legacy as nki
import torchneuron_ext.nki.legacy.isa as nisa
import torchneuron_ext.nki.legacy.language as nl
from torchneuron_ext.nki import NKIError


def f32(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


@nki.jit
def gather_rows(data, idx):
    n = idx.shape[0]
    out = nl.ndarray((n, data.shape[1]), dtype=data.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(n)[:, None]
    i_f = nl.arange(data.shape[1])[None, :]
    idx_tile = nl.load(idx[i_p])           # indices must be on chip
    nl.store(out, nl.load(data[idx_tile[i_p, 0], i_f]))
    return out


def test_indirect_load_gathers_rows() -> None:
    data, idx = f32(128, 32), np.array([5, 0, 127, 5, 64], np.int32)
    np.testing.assert_array_equal(gather_rows(data, idx), data[idx])


def test_indirect_index_out_of_bounds_is_an_error() -> None:
    with pytest.raises(NKIError) as info:
        gather_rows(f32(128, 32), np.array([1, 128], np.int32))
    assert info.value.code == "err_tensor_access_out_of_bound"
    assert "index range [1, 128] exceed dimension size of 128" in str(info.value)


def test_index_tile_must_be_on_chip_and_integer() -> None:
    @nki.jit
    def from_hbm(data, idx):
        return nl.load(data[idx, nl.arange(4)[None, :]])

    @nki.jit
    def float_index(data):
        t = nl.load(data[0:4, 0:1])
        return nl.load(data[t, nl.arange(4)[None, :]])

    with pytest.raises(NKIError) as info:
        from_hbm(f32(8, 4), np.zeros((4, 1), np.int32))
    assert info.value.code == "err_unsupported_memory"
    with pytest.raises(NKIError) as info:
        float_index(f32(8, 4))
    assert info.value.code == "err_unsupported_dtype"


@nki.jit
def scatter(src, idx, mode):
    n, m = src.shape
    out = nl.ndarray((2 * n, m), dtype=src.dtype, buffer=nl.shared_hbm)
    nl.store(out, nisa.memset(shape=(2 * n, m), value=-1, dtype=src.dtype))
    ix = nl.arange(m)[None, :]
    idx_tile = nl.load(idx)
    nisa.dma_copy(dst=out[idx_tile, ix], src=nl.load(src), oob_mode=mode)
    return out


def test_scatter_with_oob_skip_leaves_out_of_bounds_rows() -> None:
    src, idx = f32(4, 8), np.array([[1], [3], [99], [0]], np.int32)
    out = scatter(src, idx, nisa.oob_mode.skip)
    expected = np.full((8, 8), -1, np.float32)
    expected[[1, 3, 0]] = src[[0, 1, 3]]
    np.testing.assert_array_equal(out, expected)
    with pytest.raises(NKIError) as info:
        scatter(src, idx, nisa.oob_mode.error)
    assert info.value.code == "err_tensor_access_out_of_bound"


def test_gather_with_oob_skip_keeps_destination() -> None:
    @nki.jit
    def k(data, idx):
        n = idx.shape[0]
        out = nl.ndarray((n, data.shape[1]), dtype=data.dtype, buffer=nl.shared_hbm)
        t = nisa.memset(shape=(n, data.shape[1]), value=7, dtype=data.dtype)
        ix, iy = nl.mgrid[0:n, 0:data.shape[1]]
        nisa.dma_copy(src=data[nl.load(idx), iy], dst=t[ix, iy], oob_mode=nisa.oob_mode.skip)
        nl.store(out, t)
        return out

    data, idx = f32(16, 4), np.array([[2], [40], [15]], np.int32)
    expected = np.stack([data[2], np.full(4, 7, np.float32), data[15]])
    np.testing.assert_array_equal(k(data, idx), expected)


def test_scatter_add_accumulates_repeated_indices() -> None:
    @nki.jit
    def k(src, idx):
        n, m = src.shape
        out = nl.ndarray((4, m), dtype=src.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.zeros((4, m), dtype=src.dtype))
        nisa.dma_copy(dst=out[nl.load(idx), nl.arange(m)[None, :]], src=nl.load(src), dst_rmw_op=np.add)
        return out

    src, idx = f32(6, 8), np.array([[0], [2], [0], [3], [0], [2]], np.int32)
    expected = np.zeros((4, 8), np.float32)
    np.add.at(expected, idx[:, 0], src)
    np.testing.assert_allclose(k(src, idx), expected, rtol=1e-6)


def test_atomic_rmw_through_indices() -> None:
    @nki.jit
    def k(base, idx, val):
        out = nl.ndarray(base.shape, dtype=base.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(base))
        nl.atomic_rmw(out[nl.load(idx), nl.arange(base.shape[1])[None, :]], value=nl.load(val), op=np.add)
        return out

    base, val, idx = f32(8, 4), f32(3, 4), np.array([[7], [1], [7]], np.int32)
    expected = base.copy()
    np.add.at(expected, idx[:, 0], val)
    np.testing.assert_allclose(k(base, idx, val), expected, rtol=1e-6)


def test_dynamic_offset_on_a_free_axis() -> None:
    # tensor_copy_dynamic_src: columns at offsets held in a tile, offset + iy as the free index.
    @nki.jit
    def k(src, offsets):
        out = nl.ndarray((128, offsets.shape[1]), dtype=src.dtype, buffer=nl.shared_hbm)
        s, o = nl.load(src), nl.load(offsets)
        res = nl.ndarray((128, offsets.shape[1]), dtype=src.dtype, buffer=nl.sbuf)
        ix, iy = nl.mgrid[0:128, 0:1]
        for i in nl.affine_range(offsets.shape[1]):
            res[ix, i] = nisa.tensor_copy_dynamic_src(s[ix, o[0, i] + iy])
        nl.store(out, res)
        return out

    src, offsets = f32(128, 64), np.array([[3, 9, 0, 63]], np.int32)
    np.testing.assert_array_equal(k(src, offsets), src[:, offsets[0]])


def test_slice_past_the_end_is_fine_under_a_mask() -> None:
    # The last tile of 200 rows: x[128:256] runs past the end; the mask keeps the access in bounds.
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        for t in nl.affine_range(2):
            ok = t * 128 + i_p < x.shape[0]
            tile = nl.ndarray((128, x.shape[1]), dtype=x.dtype)
            nisa.dma_copy(dst=tile, src=x[t * 128:(t + 1) * 128, 0:x.shape[1]], mask=ok)
            nl.store(out[t * 128:(t + 1) * 128, 0:x.shape[1]], nl.multiply(tile, 2.0, mask=ok), mask=ok)
        return out

    x = f32(200, 8)
    np.testing.assert_allclose(k(x), 2 * x)


def test_slice_past_the_end_without_a_mask_is_an_error() -> None:
    @nki.jit
    def k(x):
        return nl.load(x[128:256, 0:8])

    with pytest.raises(NKIError) as info:
        k(f32(200, 8))
    assert info.value.code == "err_tensor_access_out_of_bound"
    assert "index range [128, 255] exceed dimension size of 200" in str(info.value)
