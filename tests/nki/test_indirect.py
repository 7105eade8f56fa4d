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


# -- Tensor Indirection: t.indirect(index, num_elem) (NKI 0.2+, NeuronCore-v4) --------------------------------
# AWS's reference: a (P, num_elem) view whose column i is free element offset(i) of each partition; in the
# group of G partitions starting at `start` (G = 16 for the Vector/Scalar/GpSimd engines, 32 for the Tensor
# engine), offset(i) = index[start + i % G, i // G]. A gather as an input, a scatter as a destination.

import expecttest  # noqa: E402
import ml_dtypes  # noqa: E402

import torchneuron_ext.nki as tnki  # noqa: E402
import torchneuron_ext.nki.isa as tisa  # noqa: E402
import torchneuron_ext.nki.language as tl  # noqa: E402


@pytest.fixture
def trn3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NKI_TARGET", "trn3")


def _sbuf(a):
    t = tl.ndarray(a.shape, dtype=a.dtype, buffer=tl.sbuf)
    tisa.dma_copy(dst=t, src=a)
    return t


def _out(t):
    o = tl.ndarray(t.shape, dtype=t.dtype, buffer=tl.shared_hbm)
    tisa.dma_copy(dst=o, src=t)
    return o


def ti_reference_offsets(index: np.ndarray, partitions: int, num_elem: int, group: int) -> np.ndarray:
    """offset[p, i] from the documented snake, element by element."""
    out = np.zeros((partitions, num_elem), np.int64)
    for p in range(partitions):
        start = (p // group) * group
        for i in range(num_elem):
            out[p, i] = index[start + i % group, i // group]
    return out


def snake_index(columns: np.ndarray, partitions: int, group: int = 16) -> np.ndarray:
    """AWS's tutorial: one list of offsets in the snake of a group, replicated over every group."""
    k = -(-columns.size // group)
    tile = np.zeros((group, k), np.uint16)
    for i, c in enumerate(columns):
        tile[i % group, i // group] = c
    return np.tile(tile, (partitions // group, 1))


@tnki.jit
def ti_copy(data, index, num_elem: int, scatter: bool = False, engine=None):
    d, i = _sbuf(data), _sbuf(index)
    if scatter:
        r = tl.ndarray(data.shape, dtype=data.dtype, buffer=tl.sbuf)
        tisa.memset(dst=r, value=-1.0)
        tisa.tensor_copy(dst=r.indirect(i, num_elem=num_elem), src=d[:, 0:num_elem], engine=engine)
    else:
        r = tl.ndarray((data.shape[0], num_elem), dtype=data.dtype, buffer=tl.sbuf)
        tisa.tensor_copy(dst=r, src=d.indirect(i, num_elem=num_elem), engine=engine)
    return _out(r)


def test_ti_gather_copies_the_same_columns_in_every_partition(trn3: None) -> None:
    # AWS's tutorial kernel: output = data[:, columns].
    rng = np.random.default_rng(0)
    data = rng.standard_normal((64, 200)).astype(np.float32)
    columns = rng.integers(0, 200, size=48)
    out = ti_copy(data, snake_index(columns, 64), 48, engine=tisa.engine.vector)
    np.testing.assert_array_equal(out, data[:, columns])


def test_ti_each_group_of_16_partitions_reads_its_own_offsets(trn3: None) -> None:
    rng = np.random.default_rng(1)
    data = rng.standard_normal((48, 40)).astype(np.float32)
    index = rng.integers(0, 40, size=(48, 3)).astype(np.uint16)
    out = ti_copy(data, index, 40)           # 40 <= 16 x 3 offsets per group
    want = np.take_along_axis(data, ti_reference_offsets(index, 48, 40, 16), axis=1)
    np.testing.assert_array_equal(out, want)


def test_ti_scatter_writes_columns_and_leaves_the_rest(trn3: None) -> None:
    rng = np.random.default_rng(2)
    data = rng.standard_normal((32, 64)).astype(np.float32)
    columns = rng.permutation(64)[:20]
    out = ti_copy(data, snake_index(columns, 32), 20, scatter=True, engine=tisa.engine.scalar)
    want = np.full((32, 64), -1.0, np.float32)
    want[:, columns] = data[:, :20]
    np.testing.assert_array_equal(out, want)


def test_ti_operands_of_arithmetic_reductions_and_activation(trn3: None) -> None:
    @tnki.jit
    def k(data, other, index):
        d, o, i = _sbuf(data), _sbuf(other), _sbuf(index)
        p = data.shape[0]
        s = tl.ndarray((p, 16), dtype=tl.float32, buffer=tl.sbuf)
        tisa.tensor_tensor(dst=s, data1=d.indirect(i), data2=o, op=tl.add, engine=tisa.engine.gpsimd)
        a = tl.ndarray((p, 16), dtype=tl.float32, buffer=tl.sbuf)
        tisa.activation(dst=a, op=tl.exp, data=d.indirect(i))
        m = tl.ndarray((p, 1), dtype=tl.float32, buffer=tl.sbuf)
        tisa.tensor_reduce(dst=m, op=tl.maximum, data=d.indirect(i), axis=1)
        c = tl.ndarray((p, 16), dtype=tl.float32, buffer=tl.sbuf)
        tisa.tensor_scalar(dst=c, data=d.indirect(i), op0=tl.multiply, operand0=3.0)
        return _out(s), _out(a), _out(m), _out(c)

    rng = np.random.default_rng(3)
    data, other = rng.standard_normal((16, 30)).astype(np.float32), rng.standard_normal((16, 16)).astype(np.float32)
    columns = rng.integers(0, 30, size=16)
    s, a, m, c = k(data, other, snake_index(columns, 16))   # num_elem defaults to index.size = 16
    g = data[:, columns]
    np.testing.assert_allclose(s, g + other, rtol=1e-6)
    np.testing.assert_allclose(a, np.exp(g), rtol=1e-6)
    np.testing.assert_array_equal(m, g.max(axis=1, keepdims=True))
    np.testing.assert_allclose(c, 3 * g, rtol=1e-6)


def test_ti_tensor_engine_reads_offsets_in_groups_of_32(trn3: None) -> None:
    @tnki.jit
    def k(stationary, moving, index, n: int):
        s, mv, i = _sbuf(stationary), _sbuf(moving), _sbuf(index)
        acc = tl.ndarray((stationary.shape[1], n), dtype=tl.float32, buffer=tl.psum)
        tisa.nc_matmul(dst=acc, stationary=s, moving=mv.indirect(i, num_elem=n))
        r = tl.ndarray(acc.shape, dtype=tl.float32, buffer=tl.sbuf)
        tisa.tensor_copy(dst=r, src=acc)
        return _out(r)

    rng = np.random.default_rng(4)
    stationary = rng.standard_normal((32, 8)).astype(ml_dtypes.bfloat16)
    moving = rng.standard_normal((32, 100)).astype(ml_dtypes.bfloat16)
    index = rng.integers(0, 100, size=(32, 2)).astype(np.uint16)
    out = k(stationary, moving, index, 64)   # 64 offsets: two columns of one 32-partition group
    want = stationary.astype(np.float32).T @ np.take_along_axis(
        moving.astype(np.float32), ti_reference_offsets(index, 32, 64, 32), axis=1)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def _ti_message(kernel, *args) -> str:
    with pytest.raises(NKIError) as info:
        kernel(*args)
    return info.value.msg


def test_ti_view_rules(trn3: None, monkeypatch: pytest.MonkeyPatch) -> None:
    data = np.zeros((32, 64), np.float32)
    good = np.zeros((32, 2), np.uint16)
    expecttest.assert_expected_inline(_ti_message(ti_copy, data, good.astype(np.uint32), 32), """.indirect(index): the offsets are uint16, got uint32 [err_unsupported_dtype]""")
    expecttest.assert_expected_inline(_ti_message(ti_copy, data, good[:16], 32), """.indirect(index): the offsets have the shape (P, K) with P = 32, the view's partitions; got (16, 2) [err_shape_mismatch]""")
    expecttest.assert_expected_inline(_ti_message(ti_copy, data, good, 65), """.indirect(index, num_elem=65): num_elem is an integer in [1, index.size = 64] [err_invalid_argument]""")
    # index.size offsets exist, but one group of 16 partitions reads only 16 x 2 of them.
    expecttest.assert_expected_inline(_ti_message(ti_copy, data, good, 33), """.indirect(index, num_elem=33): a group of 16 partitions holds 16 x 2 = 32 offsets in an index of 2 columns (offset i is index[start + i % 16, i // 16]) [err_tensor_access_out_of_bound]""")
    expecttest.assert_expected_inline(_ti_message(ti_copy, data, good + 64, 32), """.indirect(index): offsets range over [64, 64] but the tile has 64 elements per partition [err_tensor_access_out_of_bound]""")
    monkeypatch.setenv("NKI_TARGET", "trn2")
    expecttest.assert_expected_inline(_ti_message(ti_copy, data, good, 32), """.indirect(index): Tensor Indirection needs NeuronCore-v4 or later; the target is trn2 (NeuronCore-v3) [err_unsupported_instruction]""")


def test_ti_views_are_not_viewed_further(trn3: None) -> None:
    @tnki.jit
    def k(data, index, how: str):
        d, i = _sbuf(data), _sbuf(index)
        v = d.indirect(i)
        if how == "slice":
            v = v[:, 0:4]
        elif how == "again":
            v = d.ap([[64, 16], [1, 64]]).select(1, i[0:1, 0:1]).indirect(i)
        elif how == "hbm":
            v = data.indirect(i)
        return data

    data, index = np.zeros((16, 64), np.float32), np.zeros((16, 1), np.uint16)
    expecttest.assert_expected_inline(_ti_message(k, data, index, "slice"), """slice: a Tensor Indirection view (.indirect) is used as it is, by an instruction; apply views to the tile before .indirect [err_invalid_view]""")
    expecttest.assert_expected_inline(_ti_message(k, data, index, "again"), """indirect: the view already has a dynamic offset; only one dynamic select per tensor (check t.is_indirect()) [err_invalid_view]""")
    expecttest.assert_expected_inline(_ti_message(k, data, index, "hbm"), """.indirect(index) gathers or scatters an SBUF or PSUM tile, this one is in 'shared_hbm' [err_unsupported_memory]""")
    k(data, index, "none")  # the full view itself is fine


def test_ti_instruction_rules(trn3: None) -> None:
    @tnki.jit
    def k(data, index, case: str):
        d, i = _sbuf(data), _sbuf(index)
        p = data.shape[0]
        r = tl.ndarray((p, 16), dtype=data.dtype, buffer=tl.sbuf)
        if case == "data2":
            tisa.tensor_tensor(dst=r, data1=d[:, 0:16], data2=d.indirect(i, num_elem=16), op=tl.add)
        elif case == "not_an_engine":
            tisa.tensor_copy(dst=r, src=d.indirect(i, num_elem=16), engine=tisa.engine.gpsimd)
        elif case == "scalar_psum":
            acc = tl.ndarray((p, 64), dtype=tl.float32, buffer=tl.psum)
            tisa.tensor_copy(dst=acc.indirect(i, num_elem=16), src=d[:, 0:16], engine=tisa.engine.scalar)
        elif case == "unsupported_instruction":
            tisa.nc_stream_shuffle(dst=r, src=d.indirect(i, num_elem=16), shuffle_mask=[0] * 32)
        elif case == "vector_psum":  # legal: the Vector engine scatters into PSUM
            acc = tl.ndarray((p, 64), dtype=tl.float32, buffer=tl.psum)
            tisa.tensor_copy(dst=acc.indirect(i, num_elem=16), src=d[:, 0:16], engine=tisa.engine.vector)
        return data

    data, index = np.zeros((32, 64), np.float32), np.zeros((32, 1), np.uint16)
    expecttest.assert_expected_inline(_ti_message(k, data, index, "data2"), """'tensor_tensor': data2 does not support tensor indirection (.indirect); only dst and data1 do [err_unsupported_tensor_indirection]""")
    expecttest.assert_expected_inline(_ti_message(k, data, index, "not_an_engine"), """'tensor_copy' with tensor indirection runs on the Vector or Scalar engine, not Gpsimd [err_unsupported_engine]""")
    expecttest.assert_expected_inline(_ti_message(k, data, index, "scalar_psum"), """'tensor_copy': on the Scalar engine a scattered dst (.indirect) cannot be in PSUM [err_unsupported_memory]""")
    expecttest.assert_expected_inline(_ti_message(k, data, index, "unsupported_instruction"), """a Tensor Indirection view (t.indirect(index)) is accessed by an instruction or operand that does not support tensor indirection [err_unsupported_tensor_indirection]""")
    k(data, index, "vector_psum")


def test_ti_matmul_rules(trn3: None) -> None:
    @tnki.jit
    def k(a, index, case: str):
        s, i = _sbuf(a), _sbuf(index)
        acc = tl.ndarray((a.shape[1], 32), dtype=tl.float32, buffer=tl.psum)
        if case == "fp32":
            tisa.nc_matmul(dst=acc, stationary=s, moving=s.indirect(i))
        elif case == "transpose":
            tisa.nc_matmul(dst=acc, stationary=s, moving=s.indirect(i), is_transpose=True)
        elif case == "tiling":
            tisa.nc_matmul(dst=acc, stationary=s, moving=s.indirect(i), tile_position=(32, 0), tile_size=(32, 128))
        return a

    index = np.zeros((32, 1), np.uint16)
    bf = np.zeros((32, 32), ml_dtypes.bfloat16)
    expecttest.assert_expected_inline(_ti_message(k, bf.astype(np.float32), index, "fp32"), """'nc_matmul': an indirect operand (moving) must be float16, bfloat16, float8_e4m3, float8_e5m2, float8_e4m3fn, got float32 [err_unsupported_dtype]""")
    expecttest.assert_expected_inline(_ti_message(k, bf, index, "transpose"), """'nc_matmul': with is_transpose=True, moving cannot use tensor indirection [err_unsupported_tensor_indirection]""")
    expecttest.assert_expected_inline(_ti_message(k, bf, index, "tiling"), """'nc_matmul': tensor indirection is incompatible with Tensor engine tiling; tile_position must be (0, 0) or unset, got (32, 0) [err_invalid_pe_tiling]""")


def test_ti_base_partitions_of_manually_allocated_operands(trn3: None) -> None:
    @tnki.jit
    def k(data, index, case: str):
        d = tl.ndarray(data.shape, dtype=data.dtype, buffer=tl.sbuf, address=(0, 0))
        tisa.dma_copy(dst=d, src=data)
        i = tl.ndarray((64, 1), dtype=tl.uint16, buffer=tl.sbuf, address=(0, 4096))
        tisa.dma_copy(dst=i, src=index)
        r = tl.ndarray((32, 16), dtype=data.dtype, buffer=tl.sbuf, address=(32, 8192))
        if case == "quadrant":      # index starts on partition 16
            tisa.tensor_copy(dst=r[0:16], src=d[16:32].indirect(i[16:32], num_elem=16))
        elif case == "src_index":   # src on partition 0, its index on 32
            tisa.tensor_copy(dst=r, src=d[0:32].indirect(i[32:64], num_elem=16))
        elif case == "dst_index":   # dst's index on 0, src on 32
            tisa.tensor_copy(dst=d[0:32].indirect(i[0:32], num_elem=16), src=d[32:64, 0:16])
        else:                       # all on partition 32
            tisa.tensor_copy(dst=r, src=d[32:64].indirect(i[32:64], num_elem=16))
        return _out(r)

    data, index = np.zeros((64, 64), np.float32), np.zeros((64, 1), np.uint16)
    expecttest.assert_expected_inline(_ti_message(k, data, index, "quadrant"), """'tensor_copy': the index of src.indirect() starts on partition 16; it must start on a quadrant boundary (a multiple of 32) [err_invalid_start_partition]""")
    expecttest.assert_expected_inline(_ti_message(k, data, index, "src_index"), """'tensor_copy': src starts on partition 0 but its index on 32; an indirect src starts on its index's partition [err_invalid_start_partition]""")
    expecttest.assert_expected_inline(_ti_message(k, data, index, "dst_index"), """'tensor_copy': dst's index starts on partition 0, src on 32; they must start on the same partition [err_invalid_start_partition]""")
    # The legal placement gathers from the directly allocated tile (its partitions are an arena's rows).
    data = np.random.default_rng(7).standard_normal((64, 64)).astype(np.float32)
    columns = np.random.default_rng(8).integers(0, 64, size=16)
    np.testing.assert_array_equal(k(data, snake_index(columns, 64), "aligned"), data[32:64][:, columns])


def test_ti_on_the_other_documented_instructions(trn3: None) -> None:
    @tnki.jit
    def k(data, pred, index):
        d, q, i = _sbuf(data), _sbuf(pred), _sbuf(index)
        p = data.shape[0]
        e = tl.ndarray((p, 16), dtype=tl.float32, buffer=tl.sbuf)
        tisa.exponential(dst=e, src=d.indirect(i))
        c = tl.ndarray((p, 16), dtype=tl.float32, buffer=tl.sbuf)
        tisa.tensor_scalar_cumulative(dst=c, src=d.indirect(i), op0=tl.multiply, op1=tl.add, imm0=1.0)
        r = tl.ndarray((p, 16), dtype=tl.float32, buffer=tl.sbuf)
        red = tl.ndarray((p, 1), dtype=tl.float32, buffer=tl.sbuf)
        tisa.tensor_scalar_reduce(dst=r, data=d.indirect(i), op0=tl.add, operand0=1.0, reduce_op=tl.add,
                                  reduce_res=red)
        s = tl.ndarray((p, 64), dtype=tl.float32, buffer=tl.sbuf)
        tisa.memset(dst=s, value=0.0)
        tisa.tensor_copy_predicated(dst=s.indirect(i), src=d[:, 0:16], predicate=q.indirect(i))
        a = tl.ndarray((p, 16), dtype=tl.float32, buffer=tl.sbuf)
        tisa.activation_reduce(dst=a, op=tl.copy, data=d.indirect(i), reduce_op=tl.add, reduce_res=red)
        return _out(e), _out(c), _out(r), _out(s), _out(a), _out(red)

    rng = np.random.default_rng(5)
    data = rng.standard_normal((16, 64)).astype(np.float32)
    pred = (rng.random((16, 64)) < 0.5).astype(np.uint8)
    columns = rng.permutation(64)[:16]
    e, c, r, s, a, red = k(data, pred, snake_index(columns, 16))
    g = data[:, columns]
    np.testing.assert_allclose(e, np.exp(g), rtol=1e-6)
    np.testing.assert_allclose(c, np.cumsum(g, axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r, g + 1, rtol=1e-6)
    want = np.zeros((16, 64), np.float32)
    want[:, columns] = np.where(pred[:, columns] != 0, data[:, :16], 0.0)
    np.testing.assert_array_equal(s, want)
    np.testing.assert_array_equal(a, g)
    np.testing.assert_allclose(red, g.sum(axis=1, keepdims=True), rtol=1e-5)


def test_ti_matmul_gathers_stationary_and_scatters_into_psum(trn3: None) -> None:
    @tnki.jit
    def k(stationary, moving, s_index, d_index):
        s, mv, si, di = _sbuf(stationary), _sbuf(moving), _sbuf(s_index), _sbuf(d_index)
        acc = tl.ndarray((32, 64), dtype=tl.float32, buffer=tl.psum)
        zeros = tl.ndarray((32, 64), dtype=tl.float32, buffer=tl.sbuf)
        tisa.memset(dst=zeros, value=0.0)
        tisa.tensor_copy(dst=acc, src=zeros)
        # dst (32, 8) scattered into 8 of acc's 64 columns; stationary gathers 32 of its 100 columns.
        tisa.nc_matmul(dst=acc.indirect(di, num_elem=8), stationary=s.indirect(si, num_elem=32), moving=mv,
                       accumulate=True)
        r = tl.ndarray(acc.shape, dtype=tl.float32, buffer=tl.sbuf)
        tisa.tensor_copy(dst=r, src=acc)
        return _out(r)

    rng = np.random.default_rng(6)
    stationary = rng.standard_normal((32, 100)).astype(ml_dtypes.bfloat16)
    moving = rng.standard_normal((32, 8)).astype(ml_dtypes.bfloat16)
    s_cols, d_cols = rng.permutation(100)[:32], rng.permutation(64)[:8]
    out = k(stationary, moving, snake_index(s_cols, 32, 32), snake_index(d_cols, 32, 32))
    want = np.zeros((32, 64), np.float32)
    want[:, d_cols] = stationary.astype(np.float32)[:, s_cols].T @ moving.astype(np.float32)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_ti_matmul_mx_pairs_data_and_scales(trn3: None) -> None:
    @tnki.jit
    def k(index):
        i = _sbuf(index)
        data = tl.ndarray((32, 16), dtype=tl.float8_e4m3fn_x4, buffer=tl.sbuf)
        scale = tl.ndarray((32, 16), dtype=tl.uint8, buffer=tl.sbuf)
        acc = tl.ndarray((16, 16), dtype=tl.float32, buffer=tl.psum)
        tisa.nc_matmul_mx(dst=acc, stationary=data.indirect(i, num_elem=16), moving=data, stationary_scale=scale,
                          moving_scale=scale)
        return index

    expecttest.assert_expected_inline(_ti_message(k, np.zeros((32, 1), np.uint16)), """'nc_matmul_mx': stationary and stationary_scale must both use .indirect() with the same index, or neither [err_unsupported_tensor_indirection]""")
