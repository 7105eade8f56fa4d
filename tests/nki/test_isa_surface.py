"""Legacy-dialect instructions public kernels use, checked against numpy, and their keywords: each one is
honoured or refused by name; masked results write only what they computed."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import torchneuron_ext.nki.legacy as nki
import torchneuron_ext.nki.legacy.isa as nisa
import torchneuron_ext.nki.legacy.language as nl
from torchneuron_ext.nki import NKIError, NKIUnsupportedError


def f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def raises(code: str, kernel, *args) -> NKIError:
    with pytest.raises(NKIError) as info:
        kernel(*args)
    assert info.value.code == code, str(info.value)
    return info.value


def test_unknown_keyword_is_refused_by_name() -> None:
    @nki.jit
    def k(a):
        t = nl.load(a)
        nisa.tensor_copy(t, enigne=nisa.vector_engine)
        return a

    with pytest.raises(TypeError, match="enigne"):
        k(f32(4, 4))


def test_unmodelled_mask_is_refused_by_name() -> None:
    @nki.jit
    def k(a):
        i_p = nl.arange(4)[:, None]
        nisa.bn_aggr(nisa.bn_stats(nl.load(a)), mask=(i_p < 2))
        return a

    with pytest.raises(NKIUnsupportedError, match=r"nki.isa.bn_aggr\(mask=...\)"):
        k(f32(4, 4))


def test_matmul_hints_are_held_to_their_promise() -> None:
    @nki.jit
    def k(a, b, onezero, transpose):
        out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.nc_matmul(nl.load(a), nl.load(b), is_moving_onezero=onezero, is_transpose=transpose))
        return out

    a, eye = f32(32, 16), np.eye(32, dtype=np.float32)
    np.testing.assert_allclose(k(a, eye, True, True), a.T, rtol=1e-6)  # the transpose idiom
    raises("err_onezero_hint_violated", k, a, f32(32, 8), True, False)
    raises("err_is_transpose_needs_identity", k, a, 2 * eye, False, True)


def test_pe_tiling_is_validated() -> None:
    @nki.jit
    def k(a, pos, size):
        t = nl.load(a)
        nisa.nc_matmul(t, t, tile_position=pos, tile_size=size)
        return a

    k(f32(32, 32), (32, 64), (32, 32))
    raises("err_invalid_pe_tiling", k, f32(32, 32), (16, 0), (32, 32))
    raises("err_invalid_pe_tiling", k, f32(64, 64), (0, 0), (32, 32))  # smaller than stationary


def test_double_row_fp8_matmul() -> None:
    @nki.jit
    def k(a, b):
        out = nl.ndarray((a.shape[2], b.shape[2]), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.nc_matmul(nl.load(a), nl.load(b), perf_mode="double_row_gen3"))
        return out

    a = f32(128, 2, 16).astype(ml_dtypes.float8_e5m2)
    b = f32(128, 2, 64, seed=1).astype(ml_dtypes.float8_e5m2)
    expected = np.einsum("kli,klj->ij", a.astype(np.float32), b.astype(np.float32))
    np.testing.assert_allclose(k(a, b), expected, rtol=1e-5, atol=1e-4)
    raises("err_unsupported_dtype", k, f32(128, 2, 16), f32(128, 2, 64))

    @nki.jit
    def other_mode(a):
        t = nl.load(a)
        nisa.nc_matmul(t, t, perf_mode="quad_row")
        return a

    with pytest.raises(NKIUnsupportedError, match="perf_mode='quad_row'"):
        other_mode(f32(8, 8))


def test_masked_matmul_writes_only_what_it_computed() -> None:
    # The pattern of AWS's fused RMSNorm+QKV: `psum += nc_matmul(..., mask=tile_in_bounds)`.
    @nki.jit
    def k(a, b, limit):
        out = nl.ndarray((2, a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
        for i in nl.affine_range(2):
            acc += nisa.nc_matmul(nl.load(a), nl.load(b), mask=(i < limit))
        nl.store(out[0], acc)
        i_m = nl.arange(a.shape[1])[:, None]
        part = nl.zeros((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
        part[...] = nisa.nc_matmul(nl.load(a), nl.load(b), mask=(i_m < 4))
        nl.store(out[1], part)
        return out

    a, b = f32(32, 8), f32(32, 16, seed=1)
    out = k(a, b, 1)
    np.testing.assert_allclose(out[0], a.T @ b, rtol=1e-5, atol=1e-5)  # the second matmul was masked off
    np.testing.assert_allclose(out[1][:4], (a.T @ b)[:4], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[1][4:], 0)


def test_psum_operand_of_legacy_matmul() -> None:
    # AWS's flash-attention backward feeds a Tensor-engine nc_transpose (PSUM) to nc_matmul.
    @nki.jit
    def k(a, b):
        out = nl.ndarray((a.shape[0], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.nc_matmul(nisa.nc_transpose(nl.load(a)), nl.load(b)))
        return out

    a, b = f32(16, 32), f32(32, 8, seed=1)
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_tensor_scalar_reduce() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        red = nl.ndarray((a.shape[0], 1), dtype=a.dtype, buffer=nl.shared_hbm)
        r = nl.ndarray((a.shape[0], 1), dtype=nl.float32)
        y = nisa.tensor_scalar_reduce(data=nl.load(a), op0=nl.multiply, operand0=0.5, reduce_op=nl.max,
                                      reduce_res=r)
        nl.store(out, y)
        nl.store(red, r)
        return out, red

    a = f32(16, 24)
    y, r = k(a)
    np.testing.assert_allclose(y, a * 0.5)
    np.testing.assert_allclose(r, (a * 0.5).max(axis=1, keepdims=True))


def test_dma_transpose_and_load_transpose2d() -> None:
    @nki.jit
    def k(a, b):
        out_a = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.shared_hbm)
        out_b = nl.ndarray(b.shape[::-1], dtype=b.dtype, buffer=nl.shared_hbm)
        nl.store(out_a, nisa.dma_transpose(a))
        nl.store(out_b, nl.load_transpose2d(b))  # 2048 rows become 2048 free elements
        return out_a, out_b

    a, b = f32(64, 32), f32(2048, 128)
    ta, tb = k(a, b)
    np.testing.assert_array_equal(ta, a.T)
    np.testing.assert_array_equal(tb, b.T)

    @nki.jit
    def bad_axes(a):
        nisa.dma_transpose(a, axes=(0, 1))
        return a

    raises("err_unsupported_axis", bad_axes, f32(4, 4))


def test_random_seed_makes_dropout_repeatable() -> None:
    @nki.jit
    def k(a, seed):
        out = nl.ndarray((2,) + a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.random_seed(seed=nl.load(seed))
        nl.store(out[0], nisa.dropout(nl.load(a), prob=0.5))
        nl.random_seed(seed=nl.load(seed))
        nl.store(out[1], nl.dropout(nl.load(a), rate=0.5))
        return out

    a = np.ones((128, 256), np.float32)
    out = k(a, np.array([[7]], np.int32))
    np.testing.assert_array_equal(out[0], out[1])          # same seed, same mask
    assert 0.45 < (out[0] == 0).mean() < 0.55            # about half dropped
    other = k(a, np.array([[8]], np.int32))
    assert (other[0] != out[0]).any()


def test_loop_reduce_accumulates_over_the_loop() -> None:
    @nki.jit
    def k(a):
        n = a.shape[0]
        out = nl.ndarray(a.shape[1:], dtype=a.dtype, buffer=nl.shared_hbm)
        acc = nl.ndarray(a.shape[1:], dtype=a.dtype)
        for i in nl.affine_range(n):
            acc[...] = nl.loop_reduce(nl.load(a[i]), op=np.maximum, loop_indices=[i])
        nl.store(out, acc)
        return out

    a = f32(5, 16, 8)
    np.testing.assert_array_equal(k(a), a.max(axis=0))


def test_copy_predicated() -> None:
    @nki.jit
    def k(a, b, pred):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        dst = nl.load(a)
        nisa.tensor_copy_predicated(src=nl.load(b), dst=dst, predicate=nl.load(pred))
        nl.store(out, dst)
        return out

    a, b = f32(8, 8), f32(8, 8, seed=1)
    pred = (np.arange(64).reshape(8, 8) % 3 == 0).astype(np.uint8)
    np.testing.assert_array_equal(k(a, b, pred), np.where(pred != 0, b, a))
    raises("err_unsupported_dtype", k, a, b, pred.astype(np.float32))


def test_shared_hbm_output_inside_a_trace_time_if() -> None:
    @nki.jit
    def k(a, training):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        if training:
            lse = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(lse, nl.load(a))
        nl.store(out, nl.load(a))
        return (out, lse) if training else out

    a = f32(4, 4)
    out, lse = k(a, True)
    np.testing.assert_array_equal(lse, a)


def test_affine_select_on_psum() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((a.shape[1], a.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        scores = nisa.nc_matmul(t, t)
        i_q, i_k = nl.mgrid[0:a.shape[1], 0:a.shape[1]]
        nl.store(out, nisa.affine_select(pred=(i_q >= i_k), on_true_tile=scores, on_false_value=-1e4))
        return out

    a = f32(16, 8)
    s = a.T @ a
    np.testing.assert_allclose(k(a), np.where(np.tri(8, dtype=bool), s, -1e4), rtol=1e-5, atol=1e-5)


def test_nc_version_is_ordered() -> None:
    assert nisa.nc_version.gen3 >= nisa.nc_version.gen2
    assert nisa.get_nc_version() >= nisa.nc_version.gen2


def test_range_select_with_a_running_max(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NKI_TARGET", "trn2")

    @nki.jit
    def k(x, lo, hi):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        red = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
        t, b0, b1 = nl.load(x), nl.load(lo), nl.load(hi)
        r = nl.ndarray((x.shape[0], 1), dtype=nl.float32)
        nisa.range_select(on_true_tile=t, comp_op0=np.greater_equal, comp_op1=np.less, bound0=b0, bound1=b1,
                          reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=np.max, range_start=0)
        sel = nisa.range_select(on_true_tile=t, comp_op0=np.greater_equal, comp_op1=np.less, bound0=b0,
                                bound1=b1, reduce_cmd=nisa.reduce_cmd.reduce, reduce_res=r, reduce_op=np.max,
                                range_start=4, on_false_value=-1.0)
        nl.store(out, sel)
        nl.store(red, r)
        return out, red

    x = f32(8, 16)
    lo = np.full((8, 1), 6, np.float32)
    hi = np.arange(8, 16, dtype=np.float32).reshape(8, 1)
    idx = np.arange(16)[None, :]
    sel0 = np.where((idx >= lo) & (idx < hi), x, np.finfo(np.float32).min)
    sel1 = np.where((idx + 4 >= lo) & (idx + 4 < hi), x, -1.0)
    out, red = k(x, lo, hi)
    np.testing.assert_array_equal(out, sel1)
    np.testing.assert_array_equal(red, np.maximum(sel0.max(1, keepdims=True), sel1.max(1, keepdims=True)))


def test_select_reduce_stream_shuffle_match_replace_sequence_bounds() -> None:
    @nki.jit
    def k(x, pred, seg):
        outs = nl.ndarray((3,) + x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        bounds = nl.ndarray((1, 2, seg.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        sel = nl.ndarray(x.shape, dtype=x.dtype)
        nisa.select_reduce(dst=sel, predicate=nl.load(pred), on_true=t, on_false=0.0)
        nl.store(outs[0], sel)
        shuf = nl.zeros(x.shape, dtype=x.dtype)
        nisa.nc_stream_shuffle(src=t, dst=shuf, shuffle_mask=[(i + 1) % 32 for i in range(31)] + [255])
        nl.store(outs[1], shuf)
        top = nisa.max8(src=t)
        nl.store(outs[2], nisa.nc_match_replace8(data=t, vals=top, imm=-100.0))
        nl.store(bounds, nisa.sequence_bounds(segment_ids=nl.load(seg), dtype=nl.float32))
        return outs, bounds

    x = f32(32, 16)
    pred = (np.arange(32 * 16).reshape(32, 16) % 2).astype(np.uint8)
    seg = np.array([[0, 1, 1, 2, 2, 2, 0, 3, 3]], np.float32)
    outs, bounds = k(x, pred, seg)
    np.testing.assert_array_equal(outs[0], np.where(pred != 0, x, 0))
    expected = np.zeros_like(x)
    expected[:31] = x[1:]
    np.testing.assert_array_equal(outs[1], expected)
    top8 = np.argsort(-x, axis=1)[:, :8]
    replaced = x.copy()
    np.put_along_axis(replaced, top8, -100.0, axis=1)
    np.testing.assert_array_equal(outs[2], replaced)
    np.testing.assert_array_equal(bounds[0], [[9, 1, 1, 3, 3, 3, 9, 7, 7], [-1, 3, 3, 6, 6, 6, -1, 9, 9]])


def test_local_gather_inside_each_gpsimd_core() -> None:
    @nki.jit
    def k(src, index, n, valid):
        out = nl.ndarray((src.shape[0], valid, n), dtype=src.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.local_gather(nl.load(src), nl.load(index), n, valid))
        return out

    rng = np.random.default_rng(0)
    src = f32(32, 64, 2)
    per_core = rng.integers(0, 64, size=(16, 3)).astype(np.uint16)
    index = np.tile(per_core, (2, 1)) * 2         # element offsets: 2 elements per index
    expected = np.empty((32, 40, 2), np.float32)
    for c in range(2):
        rows = per_core.flatten(order="F")[:40]
        expected[c * 16:(c + 1) * 16] = np.take(src[c * 16:(c + 1) * 16], rows, axis=1)
    np.testing.assert_array_equal(k(src, index, 2, 40), expected)
    raises("err_tensor_access_out_of_bound", k, src, index + 200, 2, 40)


def test_accumulating_into_unwritten_psum_starts_there() -> None:
    # AWS's fused RMSNorm+QKV accumulates `psum += nc_matmul(...)` into an nl.ndarray (never zeroed) PSUM
    # tile, re-declared each iteration: the first accumulation writes, later ones add; written data adds.
    @nki.jit
    def k(a, b):
        out = nl.ndarray((3, a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            acc = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
            for _ in nl.affine_range(2):
                acc += nisa.nc_matmul(nl.load(a), nl.load(b))
            nl.store(out[i], acc)
        biased = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
        biased[...] = nl.full((a.shape[1], b.shape[1]), 1.0, dtype=nl.float32)
        biased += nisa.nc_matmul(nl.load(a), nl.load(b))
        nl.store(out[2], biased)
        return out

    a, b = f32(16, 8), f32(16, 4, seed=1)
    out = k(a, b)
    np.testing.assert_allclose(out[0], 2 * (a.T @ b), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[1], 2 * (a.T @ b), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[2], 1 + a.T @ b, rtol=1e-5, atol=1e-5)
