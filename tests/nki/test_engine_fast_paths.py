"""The engine's shape fast paths agree with numpy's general rules (they replace them on the hot path)."""
from __future__ import annotations

import numpy as np
import pytest

from torchneuron_ext.nki.engines.operands import broadcast_shape, larger_than

SHAPES = [[(128, 8), (128, 8)], [(128, 8), ()], [(), ()], [(), (4, 1)], [(128, 8), (128, 1)], [(1, 8), (128, 1)],
          [(128, 8), (), (128, 8)], [(4, 2, 3), (4, 1, 3)], [(128, 8), (64, 8)], [(2, 3), (3, 2)]]


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_broadcast_shape_matches_numpy(shapes: list) -> None:
    try:
        expected = np.broadcast_shapes(*shapes)
    except ValueError:
        with pytest.raises(ValueError):
            broadcast_shape(shapes)
        return
    assert broadcast_shape(shapes) == expected


@pytest.mark.parametrize("src, dst, larger", [((128, 8), (128, 8), False), ((128, 1), (128, 8), False),
                                              ((128, 8), (128, 1), True), ((4, 6), (6, 4), False),
                                              ((256, 8), (128, 8), True), ((), (1, 1), False)])
def test_larger_than(src: tuple, dst: tuple, larger: bool) -> None:
    assert larger_than(src, dst) is larger


def test_new_tiles_never_share_memory_with_their_inputs() -> None:
    """Results take over the engine's freshly computed arrays; identities and broadcasts must still copy."""
    import torchneuron_ext.nki.legacy as nki
    import torchneuron_ext.nki.legacy.isa as nisa
    import torchneuron_ext.nki.legacy.language as nl

    @nki.jit
    def k(a, b):
        t = nl.load(a)
        row = nl.load(b)                                  # (1, 4)
        results = [nl.add(t, 1.0), nl.exp(t), nl.multiply(t, t, dtype=nl.bfloat16),
                   nisa.activation(nl.copy, t), nl.add(row, t[0:1, :]).broadcast_to((3, 4)),
                   nl.maximum(t, 0.0, mask=(nl.arange(3)[:, None] < 2)), t.astype(nl.float32), nl.copy(t)]
        for r in results:
            r[...] = 7.0                                  # must not reach t
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=t)
        return out

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(k(a, np.ones((1, 4), np.float32)), a)


def test_adopted_results_are_accounted_in_sbuf(monkeypatch: pytest.MonkeyPatch) -> None:
    import torchneuron_ext.nki.legacy as nki
    import torchneuron_ext.nki.legacy.language as nl

    @nki.jit
    def k(a):
        t = nl.load(a)                                    # 128 x 16384 fp32: 64 KiB per partition
        keep = [nl.add(t, float(i)) for i in range(4)]    # the fourth result passes trn2's 224 KiB...
        total = keep[0]
        for x in keep[1:]:                                # ...as all four are read afterwards
            total = nl.add(total, x)
        return a

    monkeypatch.setenv("NKI_TARGET", "trn2")
    k(np.ones((128, 16384), np.float32))
    # The compiler spills what does not fit (no error): at least t and the four results, live together.
    assert k.last_result.costs.spill_bytes["sbuf"] >= (5 * 65536 - 229376) * 128


# nc_matmul's PSUM accumulation has fast paths (whole region fresh: overwrite; whole region started: add in
# place and leave the flags alone); an element-wise select covers mixed regions. All three against numpy, in
# the order the hardware adds (PSUM's value first), on odd shapes, strided operand views and bf16/fp32; in a tile
# the compiler places and in one placed with address= (whose flags are packed rows: runtime._own_flags).
@pytest.mark.parametrize("placed", [False, True], ids=["auto", "address"])
@pytest.mark.parametrize("dtype", [np.float32, "bfloat16"])
def test_matmul_accumulation_paths_match_numpy(dtype: object, placed: bool) -> None:
    import ml_dtypes

    import torchneuron_ext.nki as nki
    import torchneuron_ext.nki.isa as nisa
    import torchneuron_ext.nki.language as nl
    from tests.nki.kernel_io import load, store

    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((7, 3, 5)).astype(dt)    # stationary views a[:, j, :]: (7, 5), strided
    b = rng.standard_normal((7, 2, 9)).astype(dt)    # moving views b[:, j, :]: (7, 9), strided

    @nki.jit
    def k(a, b):
        ta, tb = load(a), load(b)
        acc = nl.ndarray((5, 2, 11), dtype=nl.float32, buffer=nl.psum, **({"address": (0, 2048)} if placed else {}))
        d = acc[:, 1, 1:10]                                               # a strided PSUM view
        nisa.nc_matmul(dst=d, stationary=ta[:, 0, :], moving=tb[:, 0, :])               # fresh: overwrite
        nisa.nc_matmul(dst=d, stationary=ta[:, 1, :], moving=tb[:, 1, :])               # started: add
        nisa.nc_matmul(dst=d, stationary=ta[:, 2, :], moving=tb[:, 0, :])               # started: add
        nisa.memset(dst=acc[:, 1, 4:7], value=3.0)                                     # restarts 3 columns
        nisa.nc_matmul(dst=d, stationary=ta[:, 0, :], moving=tb[:, 1, :])               # mixed: select
        nisa.nc_matmul(dst=d, stationary=ta[:, 1, :], moving=tb[:, 0, :])               # started again: add
        out = nl.ndarray((5, 9), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=out, src=d)
        return store(out)

    f = a.astype(np.float32), b.astype(np.float32)

    def p(i: int, j: int) -> np.ndarray:
        return f[0][:, i, :].T @ f[1][:, j, :]
    expected = p(0, 0)
    expected = expected + p(1, 1)
    expected = expected + p(2, 0)
    fourth = p(0, 1)
    expected = expected + fourth
    expected[:, 3:6] = fourth[:, 3:6]                                     # the memset columns start afresh
    expected = expected + p(1, 0)
    np.testing.assert_array_equal(k(a, b), expected)


def test_accumulating_matmul_leaves_psum_marked_written() -> None:
    """The started fast path skips re-marking PSUM as written: it must already be (legacy `+=` relies on it)."""
    import torchneuron_ext.nki as nki
    import torchneuron_ext.nki.isa as nisa
    import torchneuron_ext.nki.language as nl
    from tests.nki.kernel_io import load

    seen = {}

    @nki.jit
    def k(a):
        t = load(a)
        acc = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.psum)
        for _ in range(3):
            nisa.nc_matmul(dst=acc[:, 0:6], stationary=t[:, 0:4], moving=t[:, 0:6])
        storage = acc.storage
        seen["written"] = storage.flags(acc[:, 0:6].arr, "defined").copy()
        seen["started"] = storage.flags(acc[:, 0:6].arr, "started").copy()
        seen["rest"] = storage.flags(acc[:, 6:8].arr, "defined").copy()
        return a

    k(np.ones((4, 8), np.float32))
    assert seen["written"].all() and seen["started"].all() and not seen["rest"].any()


def _top8_by_sort(x: np.ndarray) -> np.ndarray:
    return -np.sort(-x, axis=1)[:, :8]


def _match_replace_by_passes(x: np.ndarray, v: np.ndarray, imm: np.float32, allowed) -> tuple:
    """nc_match_replace8 as 8 passes over each row (the reference the fast path replaces)."""
    x = x.copy()
    idx = np.full((x.shape[0], 8), np.iinfo(np.uint32).max, dtype=np.int64)
    rows = np.arange(x.shape[0])
    for j in range(7, -1, -1):
        hits = (x == v[:, j:j + 1]) & (True if allowed is None else allowed)
        found = hits.any(axis=1)
        first = hits.argmax(axis=1)
        idx[found, j] = first[found]
        x[rows[found], first[found]] = imm
    return x, idx


def _rows(kind: str) -> np.ndarray:
    rng = np.random.default_rng(7)
    if kind == "distinct":
        return rng.standard_normal((128, 3000)).astype(np.float32)
    if kind == "ties":  # few distinct values: duplicates across the top 8
        return rng.integers(-3, 4, size=(64, 500)).astype(np.float32)
    x = rng.standard_normal((64, 300)).astype(np.float32)  # signed zeros and NaNs among the largest
    x[:, :20] = 0.0
    x[:, 20:30] = -0.0
    x[::3, 40:45] = np.nan
    x[1::3] = -np.abs(x[1::3])
    return x


@pytest.mark.parametrize("kind", ["distinct", "ties", "zeros_nans"])
def test_top8_is_the_sorts_first_eight(kind: str) -> None:
    from torchneuron_ext.nki.engines.vector_select import _top8
    x = _rows(kind)
    assert _top8(x).tobytes() == _top8_by_sort(x).tobytes()
    assert _top8(x[:, :8]).tobytes() == _top8_by_sort(x[:, :8]).tobytes()


@pytest.mark.parametrize("kind", ["distinct", "ties", "zeros_nans"])
@pytest.mark.parametrize("vals", ["top8", "low", "absent"])
@pytest.mark.parametrize("masked", [False, True])
def test_match_replace_on_candidates_is_the_eight_passes(kind: str, vals: str, masked: bool) -> None:
    """The candidates-only path (vals are max8's, a handful of elements per row) and the many-candidates path
    (low vals) both give the passes' values and indices, duplicates, NaNs and a mask included."""
    from torchneuron_ext.nki.engines.vector_select import _match_replace
    x = _rows(kind)
    rng = np.random.default_rng(8)
    v = {"top8": _top8_by_sort(x), "low": np.sort(x, axis=1)[:, :8],
         "absent": np.full((x.shape[0], 8), 1e9, dtype=np.float32)}[vals].copy()
    v[::5, 3] = np.nan
    allowed = rng.random(x.shape) < 0.7 if masked else None
    for imm in (np.float32(-np.inf), np.float32(0.0)):
        expected, expected_idx = _match_replace_by_passes(x, v, imm, allowed)
        got, idx = x.copy(), np.full((x.shape[0], 8), np.iinfo(np.uint32).max, dtype=np.int64)
        _match_replace(got, v, imm, allowed, idx)
        assert got.tobytes() == expected.tobytes()
        np.testing.assert_array_equal(idx, expected_idx)


def test_scratch_arrays_are_reused_per_thread() -> None:
    """An instruction's working array is the same array on every call of the thread (no fresh pages), and
    another thread (the other core of an LNC=2 launch) has its own."""
    import threading
    from torchneuron_ext.nki.engines.operands import scratch
    a = scratch("test", (4, 8), np.float32)
    assert scratch("test", (4, 8), np.float32) is a
    assert scratch("test", (4, 9), np.float32) is not a and scratch("test", (4, 8), np.float64) is not a
    other = []
    t = threading.Thread(target=lambda: other.append(scratch("test", (4, 8), np.float32)))
    t.start()
    t.join()
    assert other[0] is not a and other[0].shape == (4, 8)


@pytest.mark.parametrize("with_nan", [False, True])
def test_bf16_transpose_into_bf16_moves_the_bits(with_nan: bool) -> None:
    """nc_transpose of a bf16 tile into a bf16 destination keeps each value's bits (they move as they are
    unless the tile holds a NaN); a NaN comes out canonical with its sign, as through fp32."""
    import ml_dtypes

    import torchneuron_ext.nki as nki
    import torchneuron_ext.nki.isa as nisa
    import torchneuron_ext.nki.language as nl

    from .kernel_io import load

    @nki.jit
    def k(a):
        t = load(a)
        tp = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.psum)
        nisa.nc_transpose(data=t, dst=tp)
        s = nl.ndarray(tp.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=tp)
        out = nl.ndarray(tp.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=s)
        return out

    bits = np.random.default_rng(0).integers(0, 1 << 16, size=(32, 48), dtype=np.uint32).astype(np.uint16)
    bits[(bits & 0x7FFF) > 0x7F80] = 0x3F80  # no NaN unless placed
    if with_nan:
        bits[3, 5], bits[7, 9] = 0x7F81, 0xFFC3
    a = bits.view(ml_dtypes.bfloat16)
    expected = bits.T.copy()
    if with_nan:
        expected[5, 3], expected[9, 7] = 0x7FC0, 0xFFC0
    np.testing.assert_array_equal(k(a).view(np.uint16), expected)
