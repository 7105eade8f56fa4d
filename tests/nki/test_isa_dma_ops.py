"""The DMA instructions of the default dialect (``dma_copy``, ``dma_transpose``, ``dma_compute``) against numpy,
their keywords and the errors AWS documents for them, and ``nki.isa``'s enumerations and handles."""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from expecttest import TestCase

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
import torchneuron_ext.nki.legacy as lnki
import torchneuron_ext.nki.legacy.isa as lisa
import torchneuron_ext.nki.legacy.language as lnl
from torchneuron_ext.nki import NKIError, NKIUnsupportedError
from torchneuron_ext.nki.isa import constants

from .kernel_io import load, store

BF16 = np.dtype(ml_dtypes.bfloat16)


def f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def first_line(err: BaseException) -> str:
    return str(err).splitlines()[0]


# -- enumerations and handles -------------------------------------------------------------------------------

def test_enumerations_carry_aws_values() -> None:
    assert {m.name: m.value for m in nisa.engine} == {
        "unknown": 0, "tensor": 1, "scalar": 2, "gpsimd": 3, "dma": 4, "vector": 5, "sync": 6}
    assert nisa.engine.activation is nisa.engine.scalar  # the legacy name, an alias
    assert {m.name: m.value for m in nisa.dge_mode} == {"unknown": 0, "swdge": 1, "hwdge": 2, "none": 3}
    assert {m.name: m.value for m in nisa.dma_engine} == {"dma": 1, "gpsimd_dma": 2}
    assert {m.name: m.value for m in nisa.matmul_perf_mode} == {"none": "none", "double_row": "double_row"}
    assert {m.name: m.value for m in nisa.oob_mode} == {"error": 0, "skip": 1}
    assert [m.value for m in nisa.reduce_cmd] == [0, 1, 2, 3, 4]
    assert nisa.vector_engine is nisa.engine.vector and nisa.scalar_engine is nisa.engine.scalar


def test_constants_module_exports_what_kernels_import() -> None:
    for name in ("dge_mode", "dma_engine", "engine", "matmul_perf_mode", "nc_version", "oob_mode", "reduce_cmd"):
        assert getattr(constants, name) is getattr(nisa, name), name


def test_nc_version_follows_the_launch_target() -> None:
    seen = {}

    def kernel_for(target: str) -> Any:
        @nki.jit(platform_target=target)
        def k(a):
            seen[target] = (nisa.get_nc_version(), nisa.get_nc_sub_version())
            return a
        return k

    for target in ("trn1", "trn2", "trn3"):
        kernel_for(target)(f32(2, 2))
    assert seen == {"trn1": (nisa.nc_version.gen2, 0), "trn2": (nisa.nc_version.gen3, 0),
                    "trn3": (nisa.nc_version.gen4, 0)}
    assert nisa.nc_version.gen4 >= nisa.nc_version.gen3 >= 3  # kernels compare versions


def test_compute_engines_refuse_the_dma_and_sync_engines() -> None:
    @nki.jit
    def k(a, eng):
        t = load(a)
        u = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=t, engine=eng)
        return a

    k(f32(4, 4), nisa.engine.gpsimd)
    with pytest.raises(ValueError, match="engine=nisa.engine.sync runs no compute instruction"):
        k(f32(4, 4), nisa.engine.sync)


def test_validation_error_catches_every_rule() -> None:
    @nki.jit
    def k(a):
        nl.ndarray((200, 4), dtype=nl.float32, buffer=nl.sbuf)
        return a

    with pytest.raises(nisa.NkiValidationError):
        k(f32(2, 2))


def test_instructions_return_handles_that_order_by_program_order() -> None:
    handles = []

    @nki.jit
    def k(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        first = nisa.dma_copy(dst=t, src=a, name="load")
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        second = nisa.dma_copy(dst=out, src=t)
        handles.extend([first, second, second.depends_on(first)])
        with pytest.raises(TypeError, match="depends_on takes the handles"):
            second.depends_on(t)
        return out

    a = f32(4, 4)
    np.testing.assert_array_equal(k(a), a)
    first, second, chained = handles
    assert isinstance(first, nisa.NkiInstruction) and chained is second
    assert first.handle == "load" and second.handle == "dma_copy"


def test_double_row_perf_mode_by_its_enum() -> None:
    fp8 = np.dtype(ml_dtypes.float8_e4m3)
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 4, (32, 2, 8)).astype(fp8)
    b = rng.integers(-3, 4, (32, 2, 16)).astype(fp8)

    @nki.jit
    def k(a, b):
        ta, tb = load(a), load(b)
        acc = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, ta, tb, perf_mode=nisa.matmul_perf_mode.double_row)
        res = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        return store(res)

    expected = np.einsum("kpm,kpn->mn", a.astype(np.float32), b.astype(np.float32))
    np.testing.assert_array_equal(k(a, b), expected)


# -- dma_copy -----------------------------------------------------------------------------------------------

def _round_trip(src_dtype: Any, dst_dtype: Any, **keywords: Any) -> Any:
    @nki.jit
    def k(a):
        t = nl.ndarray(a.shape, dtype=dst_dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a, **keywords)
        out = nl.ndarray(a.shape, dtype=dst_dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    return k


def test_dma_copy_converts_through_fp32() -> None:
    big = np.array([[2 ** 24 + 1, -7]], np.int32)
    np.testing.assert_array_equal(_round_trip(np.int32, np.int32)(big), big)  # same dtype: bits copied
    # int32 -> uint32 goes through fp32, which has 24 significant bits.
    np.testing.assert_array_equal(_round_trip(np.int32, np.uint32)(big[:, :1]), [[2 ** 24]])
    x = f32(8, 16)
    np.testing.assert_array_equal(_round_trip(np.float32, nl.bfloat16)(x), x.astype(BF16))


def test_dma_copy_keywords_that_do_not_change_the_data() -> None:
    x = f32(8, 16)
    for keywords in ({"dge_mode": nisa.dge_mode.none}, {"dge_mode": nisa.dge_mode.swdge},
                     {"dge_mode": nisa.dge_mode.hwdge, "engine": nisa.engine.scalar},
                     {"dge_mode": nisa.dge_mode.hwdge, "engine": nisa.engine.sync},
                     {"unique_indices": False}, {"oob_mode": nisa.oob_mode.skip}, {"name": "w"}):
        np.testing.assert_array_equal(_round_trip(np.float32, np.float32, **keywords)(x), x, err_msg=str(keywords))


def test_dma_copy_priority_is_a_neuroncore_v4_feature() -> None:
    x = f32(4, 4)

    @nki.jit(platform_target="trn3")
    def on_trn3(a, priority):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a, priority=priority)
        return out

    np.testing.assert_array_equal(on_trn3(x, 0), x)
    with pytest.raises(ValueError, match="priority must be an integer from 0"):
        on_trn3(x, 4)
    with pytest.raises(NKIError) as info:
        _round_trip(np.float32, np.float32, priority=1)(x)
    assert info.value.code == "err_unsupported_dma_priority"


def test_dma_copy_read_modify_write_adds_in_fp32() -> None:
    @nki.jit
    def k(a, b):
        t = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_copy(dst=t, src=b, dst_rmw_op=nl.add)
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    a, b = f32(8, 8), f32(8, 8, seed=1)
    expected = (a.astype(BF16).astype(np.float32) + b).astype(BF16).astype(np.float32)
    np.testing.assert_array_equal(k(a, b), expected)


def test_dma_copy_errors() -> None:
    x = f32(4, 4)

    @nki.jit
    def into_psum(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.psum)
        nisa.dma_copy(dst=t, src=a)
        return a

    with pytest.raises(NKIError) as info:
        into_psum(x)
    assert info.value.code == "err_unsupported_memory"

    @nki.jit
    def counts_differ(a):
        t = nl.ndarray((4, 3), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        return a

    with pytest.raises(NKIError) as info:
        counts_differ(x)
    assert info.value.code == "err_shape_mismatch"
    assert first_line(info.value) == "dma_copy from (4, 4) to (4, 3): element counts differ [err_shape_mismatch]"
    with pytest.raises(ValueError, match="engine must be nisa.engine.sync or nisa.engine.scalar"):
        _round_trip(np.float32, np.float32, dge_mode=nisa.dge_mode.hwdge, engine=nisa.engine.vector)(x)
    with pytest.raises(ValueError, match="only valid with dge_mode=nisa.dge_mode.hwdge"):
        _round_trip(np.float32, np.float32, engine=nisa.engine.sync)(x)
    with pytest.raises(ValueError, match="oob_mode must be"):
        _round_trip(np.float32, np.float32, oob_mode="skip")(x)
    for bad in (4, True, "hwdge"):
        with pytest.raises(ValueError, match="dge_mode must be one of"):
            _round_trip(np.float32, np.float32, dge_mode=bad)(x)
    with pytest.raises(TypeError, match="dge_mod"):
        _round_trip(np.float32, np.float32, dge_mod=nisa.dge_mode.none)(x)


class TestDmaMessages(TestCase):
    def _error(self, kernel: Any, *args: Any) -> str:
        with self.assertRaises(NKIError) as ctx:
            kernel(*args)
        return first_line(ctx.exception)

    def test_rmw_op_other_than_add(self) -> None:
        self.assertExpectedInline(self._error(_round_trip(np.float32, np.float32, dst_rmw_op=nl.multiply),
                                              f32(4, 4)), """\
'dma_copy' supports dst_rmw_op=nl.add only, got multiply [err_unsupported_dma_rmw_op]""")

    def test_rmw_with_skip(self) -> None:
        kernel = _round_trip(np.float32, np.float32, dst_rmw_op=nl.add, oob_mode=nisa.oob_mode.skip)
        self.assertExpectedInline(self._error(kernel, f32(4, 4)), """\
'dma_copy' with dst_rmw_op allows only oob_mode=nisa.oob_mode.error [err_invalid_oob_mode]""")

    def test_hwdge_before_trn2(self) -> None:
        @nki.jit(platform_target="trn1")
        def k(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=a, dge_mode=nisa.dge_mode.hwdge)
            return out

        self.assertExpectedInline(self._error(k, f32(4, 4)), """\
'dma_copy' with dge_mode=hwdge needs NeuronCore-v3 (trn2) or newer; the target is trn1 (NeuronCore-v2) [err_unsupported_dge_mode]""")

    def test_transpose_dtype_mismatch(self) -> None:
        @nki.jit
        def k(a):
            t = nl.ndarray((a.shape[1], a.shape[0]), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.dma_transpose(dst=t, src=a)
            return a

        self.assertExpectedInline(self._error(k, f32(4, 8)), """\
'dma_transpose' moves data without converting it: src is float32 and dst bfloat16; transpose into a tile of the source's dtype and convert with nisa.tensor_copy [err_unsupported_dtype]""")

    def test_hwdge_transpose_limits(self) -> None:
        self.assertExpectedInline(self._error(_transpose_2d(dge_mode=nisa.dge_mode.hwdge),
                                              f32(32, 64).astype(np.float16)), """\
'dma_transpose' with dge_mode=hwdge needs src.shape[0] == 16, src.shape[-1] <= 128 and a 2-byte dtype; got src (32, 64) float16 [err_unsupported_dma_transpose]""")

    def test_swdge_transpose_of_a_static_source(self) -> None:
        self.assertExpectedInline(self._error(_transpose_2d(dge_mode=nisa.dge_mode.swdge),
                                              f32(16, 64).astype(np.float16)), """\
'dma_transpose' with dge_mode=swdge needs a src addressed at run time (a tile of indices or a scalar offset); a static src takes dge_mode=hwdge, none or unknown [err_unsupported_dge_mode]""")

    def test_dma_compute_scales(self) -> None:
        self.assertExpectedInline(self._error(_compute(2, scales=[1.0, 0.5]), f32(4, 4), f32(4, 4)), """\
'dma_compute' supports scales of 1.0 only, got [1.0, 0.5] [err_unsupported_dma_compute_scale]""")

    def test_dma_compute_op(self) -> None:
        self.assertExpectedInline(self._error(_compute(2, reduce_op=nl.maximum), f32(4, 4), f32(4, 4)), """\
'dma_compute' supports reduce_op=nl.add only, got maximum [err_unsupported_dma_compute_op]""")


# -- dma_transpose ------------------------------------------------------------------------------------------

def _transpose_2d(via_sbuf: bool = False, **keywords: Any) -> Any:
    @nki.jit
    def k(a):
        src = a
        if via_sbuf:
            src = load(a)
        t = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=src, **keywords)
        return store(t)
    return k


def test_dma_transpose_2d_from_hbm_and_sbuf() -> None:
    x = (f32(16, 128) * 100).astype(np.float16)
    for kernel in (_transpose_2d(), _transpose_2d(via_sbuf=True), _transpose_2d(axes=(1, 0), name="t"),
                   _transpose_2d(dge_mode=nisa.dge_mode.hwdge), _transpose_2d(dge_mode=nisa.dge_mode.none)):
        np.testing.assert_array_equal(kernel(x), x.T)


def test_dma_transpose_4d_through_access_patterns() -> None:
    # The attention kernels' load of q^T: a (rows, 1, 1, d) view of HBM lands as (d, 1, 1, rows) in SBUF.
    rows, d = 64, 32

    @nki.jit
    def k(q):
        t = nl.ndarray((d, rows), dtype=q.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t.ap([[rows, d], [1, 1], [1, 1], [1, rows]]),
                           src=q.ap([[d, rows], [1, 1], [1, 1], [1, d]], offset=d))
        return store(t)

    q = f32(rows + 1, d).astype(BF16)
    np.testing.assert_array_equal(k(q), q[1:].T)


def test_dma_transpose_3d() -> None:
    @nki.jit
    def k(a):
        t = nl.ndarray((a.shape[2], a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=a, axes=(2, 1, 0))
        return store(t)

    x = f32(8, 4, 16)
    np.testing.assert_array_equal(k(x), np.transpose(x, (2, 1, 0)))


def test_dma_transpose_errors() -> None:
    x = f32(8, 16)
    with pytest.raises(NKIError) as info:
        _transpose_2d(axes=(0, 1))(x)
    assert info.value.code == "err_unsupported_axis"
    with pytest.raises(NKIError) as info:
        _transpose_2d(oob_mode=nisa.oob_mode.skip)(x)  # skip is for gathers
    assert info.value.code == "err_invalid_oob_mode"

    @nki.jit
    def into_psum(a):
        t = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.psum)
        nisa.dma_transpose(dst=t, src=a)
        return a

    with pytest.raises(NKIError) as info:
        into_psum(x)
    assert info.value.code == "err_unsupported_memory"

    @nki.jit(platform_target="trn1")
    def hwdge_on_trn1(a):
        t = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=a, dge_mode=nisa.dge_mode.hwdge)
        return a

    with pytest.raises(NKIError) as info:
        hwdge_on_trn1(x[:, :].astype(np.float16)[:16])
    assert info.value.code == "err_unsupported_dge_mode"


def test_gather_transpose() -> None:
    # AWS's indirect transpose: dst = src[indices].T, here through the legacy dialect's tile indexing.
    @lnki.jit
    def k(src, idx):
        i_p = lnl.arange(32)[:, None, None]
        idx_t = lnl.load(idx)
        iy = lnl.arange(src.shape[1])[None, :, None]
        iz = lnl.arange(src.shape[2])[None, None, :]
        t = lisa.dma_transpose(src[idx_t[i_p, 0], iy, iz], axes=(2, 1, 0), dge_mode=lisa.dge_mode.swdge)
        out = lnl.ndarray(t.shape, dtype=src.dtype, buffer=lnl.shared_hbm)
        lnl.store(out, t)
        return out

    src = np.arange(64 * 4 * 16).reshape(64, 4, 16).astype(np.float16)
    idx = np.random.default_rng(0).permutation(64)[:32].astype(np.uint32).reshape(32, 1)
    np.testing.assert_array_equal(k(src, idx), np.transpose(src[idx[:, 0]], (2, 1, 0)))


# -- dma_compute --------------------------------------------------------------------------------------------

def _compute(n: int, dst_dtype: Any = np.float32, to_hbm: bool = False, **keywords: Any) -> Any:
    keywords.setdefault("reduce_op", nl.add)

    @nki.jit
    def k(*srcs):
        shape = srcs[0].shape
        if to_hbm:
            out = nl.ndarray(shape, dtype=dst_dtype, buffer=nl.shared_hbm)
            nisa.dma_compute(out, list(srcs), **keywords)
            return out
        t = nl.ndarray(shape, dtype=dst_dtype, buffer=nl.sbuf)
        nisa.dma_compute(dst=t, srcs=list(srcs), **keywords)
        return store(t)
    return k


def test_dma_compute_sums_sources_in_fp32() -> None:
    xs = [f32(16, 32, seed=s).astype(BF16) for s in range(3)]
    exact = sum(x.astype(np.float32) for x in xs)
    np.testing.assert_array_equal(_compute(3)(*xs), exact)
    np.testing.assert_array_equal(_compute(3, to_hbm=True, scales=(1.0, 1.0, 1.0))(*xs), exact)
    np.testing.assert_array_equal(_compute(3, dst_dtype=nl.bfloat16)(*xs), exact.astype(BF16))
    np.testing.assert_array_equal(_compute(1, name="acc")(xs[0]), xs[0].astype(np.float32))


def test_dma_compute_accumulates_into_its_destination() -> None:
    # The library's residual add: dst = dst + src, dst among the sources.
    @nki.jit
    def k(a, b):
        t = load(a)  # float32, as the sum
        nisa.dma_compute(dst=t, srcs=[b, t], reduce_op=nl.add)
        return store(t)

    a, b = f32(8, 8), f32(8, 8, seed=1)
    np.testing.assert_array_equal(k(a, b), a + b)


def test_dma_compute_scatter_read_modify_write() -> None:
    @nki.jit
    def k(table, rows, idx):
        idx_t, r = load(idx), load(rows)
        nisa.dma_compute(dst=table[idx_t], srcs=[table[idx_t], r], reduce_op=nl.add, oob_mode=nisa.oob_mode.skip)
        return table

    table, rows = f32(16, 8), f32(4, 8, seed=1)
    idx = np.array([[3], [0], [99], [7]], np.int32)  # 99 is out of bounds: skipped
    expected = table.copy()
    for i, row in zip(idx[:, 0], rows):
        if i < 16:
            expected[i] += row
    np.testing.assert_array_equal(k(table.copy(), rows, idx), expected)


def test_dma_compute_errors() -> None:
    x = f32(4, 4)
    with pytest.raises(NKIError) as info:
        _compute(17)(*([x] * 17))
    assert info.value.code == "err_dma_compute_num_srcs"
    with pytest.raises(NKIError) as info:
        _compute(2, scales=[1.0])(x, x)
    assert info.value.code == "err_dma_compute_num_scales"
    with pytest.raises(NKIError) as info:
        _compute(2)(x, f32(4, 5))
    assert info.value.code == "err_shape_mismatch"

    @nki.jit
    def from_psum(a):
        p = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.psum)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_compute(dst=t, srcs=[p], reduce_op=nl.add)
        return a

    with pytest.raises(NKIError) as info:
        from_psum(x)
    assert info.value.code == "err_unsupported_memory"

    @nki.jit
    def not_a_list(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_compute(dst=t, srcs=a, reduce_op=nl.add)
        return a

    with pytest.raises(TypeError, match="srcs as a list"):
        not_a_list(x)

    @nki.jit
    def repeated_indices(table, idx):
        idx_t, r = load(idx), load(table[0:idx.shape[0], :])
        nisa.dma_compute(dst=table[idx_t], srcs=[table[idx_t], r], reduce_op=nl.add, unique_indices=False)
        return table

    with pytest.raises(NKIUnsupportedError, match="unique_indices=False"):
        repeated_indices(f32(8, 4), np.zeros((2, 1), np.int32))
