"""nc_matmul's operand shapes in the current dialect: the free dimensions of stationary, moving and dst are
flattened (AWS's ISA reference speaks of each tile's "free dimension size"; an instruction reads a partition
through an access pattern of up to four dimensions), so views such as ``w[0:128, g, 0:128]`` of a 3-D tile,
shaped (128, 1, 128), are operands. The legacy dialect keeps its 2-D tiles."""
from __future__ import annotations

from typing import Any, Callable

import expecttest
import numpy as np
import pytest

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
import torchneuron_ext.nki.legacy as lnki
import torchneuron_ext.nki.legacy.isa as lisa
import torchneuron_ext.nki.legacy.language as lnl
from torchneuron_ext.nki import NKIError


def f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _matmul(st_shape: tuple, mv_shape: tuple, dst_shape: tuple) -> Callable[..., Any]:
    """A kernel computing stationary.T @ moving with operands of the given shapes (same data, reshaped)."""
    @nki.jit
    def k(a, b):
        out = nl.ndarray(dst_shape, dtype=nl.float32, buffer=nl.shared_hbm)
        st = nl.ndarray(st_shape, dtype=a.dtype, buffer=nl.sbuf)
        mv = nl.ndarray(mv_shape, dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=st, src=a)
        nisa.dma_copy(dst=mv, src=b)
        acc = nl.ndarray(dst_shape, dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=st, moving=mv)
        res = nl.ndarray(dst_shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out, src=res)
        return out
    return k


def test_stationary_with_a_unit_free_dimension_is_flattened() -> None:
    a, b = f32(128, 1, 64), f32(128, 96, seed=1)
    got = _matmul(a.shape, b.shape, (64, 96))(a, b)
    np.testing.assert_allclose(got, a.reshape(128, 64).T @ b, rtol=1e-5, atol=1e-4)


def test_moving_and_dst_with_two_free_dimensions() -> None:
    a, b = f32(32, 16), f32(32, 4, 8, seed=1)
    got = _matmul(a.shape, b.shape, (16, 4, 8))(a, b)
    np.testing.assert_allclose(got, (a.T @ b.reshape(32, 32)).reshape(16, 4, 8), rtol=1e-5, atol=1e-4)


def test_view_of_a_3d_weight_tile_as_the_moe_kernels_take_it() -> None:
    @nki.jit
    def k(w, x):
        out = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        wt = nl.ndarray(w.shape, dtype=w.dtype, buffer=nl.sbuf)
        xt = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=wt, src=w)
        nisa.dma_copy(dst=xt, src=x)
        acc = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=wt[0:32, 1:2, 0:8], moving=xt[0:32, 0:16])
        res = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out, src=res)
        return out

    w, x = f32(32, 2, 8), f32(32, 16, seed=1)
    np.testing.assert_allclose(k(w, x), w[:, 1, :].T @ x, rtol=1e-5, atol=1e-4)


def _error(fn: Callable[[], Any]) -> str:
    with pytest.raises(NKIError) as info:
        fn()
    return str(info.value).splitlines()[0]


@lnki.jit
def _legacy_matmul(a, b):
    r = lisa.nc_matmul(lnl.load(a), lnl.load(b))
    out = lnl.ndarray(r.shape, dtype=r.dtype, buffer=lnl.shared_hbm)
    lnl.store(out, value=r)
    return out


class TestMatmulShapeErrors(expecttest.TestCase):
    def test_too_many_free_dimensions(self) -> None:
        a, b = f32(8, 1, 1, 1, 1, 4), f32(8, 4, seed=1)
        self.assertExpectedInline(_error(lambda: _matmul(a.shape, b.shape, (4, 4))(a, b)), """\
'nc_matmul' takes tiles of at most 4 free dimensions, got stationary (8, 1, 1, 1, 1, 4) and moving (8, 4) [err_exceed_max_supported_dimension]""")

    def test_dst_free_size_must_match(self) -> None:
        a, b = f32(8, 1, 4), f32(8, 4, seed=1)
        self.assertExpectedInline(_error(lambda: _matmul(a.shape, b.shape, (4, 2, 4))(a, b)), """\
'nc_matmul' produces (4, 4) but dst is (4, 2, 4) [err_shape_mismatch]""")

    def test_partition_sizes_must_match(self) -> None:
        a, b = f32(8, 1, 4), f32(16, 4, seed=1)
        self.assertExpectedInline(_error(lambda: _matmul(a.shape, b.shape, (4, 4))(a, b)), """\
number of partitions (dimension 0 size of a tile) mismatch in parameters (stationary[8, 1, 4], moving[16, 4]) of 'nc_matmul': the contraction runs over the partition dimension of both [err_num_partition_mismatch]""")

    def test_the_legacy_dialect_keeps_2d_tiles(self) -> None:
        a, b = f32(8, 1, 4), f32(8, 4, seed=1)
        np.testing.assert_allclose(_legacy_matmul(a[:, 0, :], b), a[:, 0, :].T @ b, rtol=1e-5, atol=1e-5)
        self.assertExpectedInline(_error(lambda: _legacy_matmul(a, b)), """\
'nc_matmul' takes 2-D tiles, got stationary (8, 1, 4) and moving (8, 4) [err_exceed_max_supported_dimension]""")
