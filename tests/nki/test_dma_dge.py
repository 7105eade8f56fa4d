"""How DMA descriptors are generated (``dge_mode``) and which addressing each mode takes, after AWS's DGE
reference (nki-dge.rst, "How .ap() affects DGE mode") and ``nisa.dma_transpose``'s constraints: a static
source, a source moved by a scalar offset, and a gathered source (``.ap(vector_offset=)``), checked against
numpy and, where the compiler refuses a combination, against its error."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from expecttest import TestCase

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
from torchneuron_ext.nki import NKIError


def f16(*shape: int, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 10).astype(np.float16)


def _indices(idx_hbm: Any) -> Any:
    """An HBM (n, 1) uint32 array of row numbers, as the SBUF tile of indices a gather reads."""
    t = nl.ndarray(idx_hbm.shape, dtype=idx_hbm.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=idx_hbm)
    return t


def _gather_transpose(**keywords: Any) -> Any:
    """AWS's dma_transpose example: dst = src[indices].T, the (P, F) rows picked by a (P, 1) tile."""
    @nki.jit
    def k(src, idx_hbm):
        p, f = idx_hbm.shape[0], src.shape[1]
        idx = _indices(idx_hbm)
        dst = nl.ndarray((f, p), dtype=src.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=dst, src=src.ap(pattern=[[f, p], [1, f]], vector_offset=idx, indirect_dim=0),
                           **keywords)
        out = nl.ndarray(dst.shape, dtype=src.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=dst)
        return out
    return k


def _rows(n: int, of: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).permutation(of)[:n].astype(np.uint32).reshape(n, 1)


@pytest.mark.parametrize("mode", [None, nisa.dge_mode.unknown, nisa.dge_mode.swdge])
def test_gather_transpose_through_a_vector_offset(mode: Any) -> None:
    # unknown lets the compiler pick software DGE, the only generator of a gather.
    src, idx = f16(256, 64), _rows(32, 256)
    kernel = _gather_transpose() if mode is None else _gather_transpose(dge_mode=mode)
    np.testing.assert_array_equal(kernel(src, idx), src[idx[:, 0]].T)


def test_gather_transpose_of_4d_blocks() -> None:
    # attention_tkg's K^T load: (128 blocks, 1, block_len, d) gathered by block number, permuted (3, 1, 2, 0).
    n_blocks, block_len, d = 40, 4, 32

    @nki.jit
    def k(cache, idx_hbm):
        idx = _indices(idx_hbm)
        p = idx_hbm.shape[0]
        dst = nl.ndarray((d, 1, block_len, p), dtype=cache.dtype, buffer=nl.sbuf)
        src = cache.ap([[block_len * d, p], [1, 1], [d, block_len], [1, d]], offset=0, vector_offset=idx,
                       indirect_dim=0)
        nisa.dma_transpose(dst=dst, src=src, axes=(3, 1, 2, 0), dge_mode=nisa.dge_mode.swdge)
        out = nl.ndarray(dst.shape, dtype=cache.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=dst)
        return out

    cache, idx = f16(n_blocks, block_len, d), _rows(16, n_blocks)
    ref = np.transpose(cache[idx[:, 0]][:, None], (3, 1, 2, 0))
    np.testing.assert_array_equal(k(cache, idx), ref)


def test_swdge_transpose_of_a_scalar_offset_source() -> None:
    # A source moved by a run-time scalar offset takes any mode, swdge included (not a gather).
    @nki.jit
    def k(src):
        reg = nisa.register_alloc(2)
        dst = nl.ndarray((src.shape[2], 16), dtype=src.dtype, buffer=nl.sbuf)
        view = src.ap(pattern=[[src.shape[2], 16], [1, src.shape[2]]], scalar_offset=reg, indirect_dim=0)
        nisa.dma_transpose(dst=dst, src=view, dge_mode=nisa.dge_mode.swdge)
        out = nl.ndarray(dst.shape, dtype=src.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=dst)
        return out

    src = f16(4, 16, 32)
    np.testing.assert_array_equal(k(src), src[2].T)


@pytest.mark.parametrize("raw, member", [(0, "unknown"), (2, "hwdge"), (3, "none")])
def test_dge_mode_as_its_raw_value(raw: int, member: str) -> None:
    # AWS's NKI Library passes dge_mode=3 (_DGE_MODE_NONE) to dma_copy and dma_transpose.
    @nki.jit
    def k(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a, dge_mode=raw)
        tt = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=tt, src=a, dge_mode=raw)
        out = nl.ndarray(tt.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=tt)
        return out

    assert nisa.dge_mode(raw).name == member
    a = f16(16, 128)
    np.testing.assert_array_equal(k(a), a.T)


def test_raw_dge_mode_keeps_its_members_rules() -> None:
    # 2 is hwdge, so it needs NeuronCore-v3 as the member does: the value is read, not ignored.
    @nki.jit(platform_target="trn1")
    def k(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a, dge_mode=2)
        return a

    with pytest.raises(NKIError) as info:
        k(f16(4, 4))
    assert info.value.code == "err_unsupported_dge_mode"


class TestDgeModeErrors(TestCase):
    def _error(self, kernel: Any, *args: Any) -> str:
        with self.assertRaises(NKIError) as ctx:
            kernel(*args)
        return str(ctx.exception).splitlines()[0]

    def test_gather_transpose_with_hardware_dge(self) -> None:
        self.assertExpectedInline(self._error(_gather_transpose(dge_mode=nisa.dge_mode.hwdge), f16(64, 32),
                                              _rows(16, 64)), """\
'dma_transpose' of a src indexed by a tile of indices is the software DGE's gather transpose: dge_mode=hwdge cannot generate it; use dge_mode=swdge or leave it unknown [err_unsupported_dge_mode]""")

    def test_gather_transpose_with_host_descriptors(self) -> None:
        with self.assertRaises(NKIError) as ctx:
            _gather_transpose(dge_mode=nisa.dge_mode.none)(f16(64, 32), _rows(16, 64))
        self.assertEqual(ctx.exception.code, "err_unsupported_dge_mode")

    def test_gather_transpose_of_4_byte_data(self) -> None:
        # The gather transpose moves 2-byte elements only, whichever mode (unknown) chose it.
        self.assertExpectedInline(self._error(_gather_transpose(), f16(64, 32).astype(np.float32),
                                              _rows(16, 64)), """\
'dma_transpose' of a gathered src needs it in HBM, 2-byte, with src.shape[0] a multiple of 16, src.shape[-1] <= 128 and (4-D) src.shape[1] or src.shape[2] equal to 1; got (16, 32) float32 in shared_hbm [err_unsupported_dma_transpose]""")

    def test_gather_transpose_rows_not_a_multiple_of_16(self) -> None:
        with self.assertRaises(NKIError) as ctx:
            _gather_transpose(dge_mode=nisa.dge_mode.swdge)(f16(64, 32), _rows(24, 64))
        self.assertEqual(ctx.exception.code, "err_unsupported_dma_transpose")

    def test_gather_copy_with_hardware_dge(self) -> None:
        @nki.jit
        def k(src, idx_hbm):
            idx = _indices(idx_hbm)
            p, f = idx_hbm.shape[0], src.shape[1]
            t = nl.ndarray((p, f), dtype=src.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=src.ap(pattern=[[f, p], [1, f]], vector_offset=idx, indirect_dim=0),
                          dge_mode=nisa.dge_mode.hwdge)
            return src

        self.assertExpectedInline(self._error(k, f16(64, 32), _rows(16, 64)), """\
'dma_copy' with dge_mode=hwdge: operand 'src' is indexed by a tile of indices (a gather or scatter), which only software DGE generates; use dge_mode=swdge or leave it unknown [err_unsupported_dge_mode]""")
