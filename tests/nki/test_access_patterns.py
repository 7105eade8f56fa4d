"""Tensor views and access patterns of the current dialect (issue 29): AWS's NkiTensor view methods, ``.ap()``
with static and dynamic (scalar / vector) offsets, and what a tensor is as a Python object.

Each kernel copies a view into a new HBM tensor (or writes through one), and the result is checked against
numpy: ``as_strided`` over the flat input for patterns, numpy's own indexing for the view methods.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from expecttest import TestCase

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
import torchneuron_ext.nki.legacy as lnki
import torchneuron_ext.nki.legacy.language as lnl
from torchneuron_ext.nki import NKIError

from .kernel_io import load

as_strided = np.lib.stride_tricks.as_strided


def f32(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def pattern_ref(a: np.ndarray, pattern: list, offset: int) -> np.ndarray:
    """What an access pattern reads from ``a``: numpy's as_strided over its flat elements."""
    flat = np.ascontiguousarray(a).reshape(-1)
    return as_strided(flat[offset:], shape=[n for _, n in pattern],
                      strides=[s * flat.itemsize for s, _ in pattern]).copy()


def _copy_out(view):
    """The view's elements in a new HBM tensor of its shape (one DMA reads through the view)."""
    out = nl.ndarray(view.shape, dtype=view.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=view)
    return out


# ---------------------------------------------------------------------------------------------------------
# view methods against numpy
# ---------------------------------------------------------------------------------------------------------

VIEW_CASES = [
    # (input shape, the view as a function of the tensor, the same view in numpy)
    ((4, 6, 8), lambda t: t.slice(1, 1, 5, 2), lambda a: a[:, 1:5:2]),
    ((4, 6, 8), lambda t: t.slice(0, 1, 3), lambda a: a[1:3]),
    ((4, 6, 8), lambda t: t.select(1, 3), lambda a: a[:, 3]),
    ((4, 6, 8), lambda t: t.permute((2, 0, 1)), lambda a: a.transpose(2, 0, 1)),
    ((4, 1, 8), lambda t: t.broadcast(1, 5), lambda a: np.broadcast_to(a, (4, 5, 8))),
    ((4, 8), lambda t: t.expand_dim(1), lambda a: a[:, None, :]),
    ((4, 8), lambda t: t.expand_dim(2), lambda a: a[:, :, None]),
    ((4, 1, 8), lambda t: t.squeeze_dim(1), lambda a: a[:, 0]),
    ((4, 24), lambda t: t.reshape_dim(1, (4, -1)), lambda a: a.reshape(4, 4, 6)),
    ((4, 2, 3, 4), lambda t: t.flatten_dims(1, 2), lambda a: a.reshape(4, 6, 4)),
    ((4, 6, 8), lambda t: t.reshape((4, 48)), lambda a: a.reshape(4, 48)),
    ((4, 6, 8), lambda t: t.reshape((24, 8)), lambda a: a.reshape(24, 8)),
    ((8, 16), lambda t: t.slice(1, 0, 16, 2).reshape((64,)), lambda a: a[:, ::2].reshape(64)),  # one stride of 2
    ((4, 24), lambda t: t.rearrange(("b", ("h", "w")), ("b", "w", "h"), {"h": 4}),
     lambda a: a.reshape(4, 4, 6).transpose(0, 2, 1)),
    ((4, 6, 8), lambda t: t.slice(2, 0, 8, 2).permute((0, 2, 1)).slice(1, 1, 3),
     lambda a: a[:, :, 0:8:2].transpose(0, 2, 1)[:, 1:3]),
    ((4, 6, 8), lambda t: t[1:3, ::2].select(2, 7), lambda a: a[1:3, ::2, 7]),
]


@pytest.mark.parametrize("case", range(len(VIEW_CASES)))
def test_view_methods_read_what_numpy_reads(case: int) -> None:
    shape, view, ref = VIEW_CASES[case]

    @nki.jit
    def k(a):
        return _copy_out(view(a))

    a = f32(*shape)
    np.testing.assert_array_equal(k(a), ref(a))


def test_view_methods_on_sbuf_tiles() -> None:
    @nki.jit
    def k(a):
        t = load(a)
        v = t.reshape_dim(1, (6, 8)).permute((0, 2, 1)).slice(2, 1, 6, 2)
        out = nl.ndarray(v.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=out, src=v)
        return _copy_out(out)

    a = f32(16, 48)
    np.testing.assert_array_equal(k(a), a.reshape(16, 6, 8).transpose(0, 2, 1)[:, :, 1:6:2])


def test_views_write_through_to_the_allocation() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((8, 6), dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        nisa.dma_copy(dst=out.permute((1, 0)).slice(0, 0, 6, 2), src=a.permute((1, 0)).slice(0, 1, 6, 2))
        return out

    a = f32(8, 6)
    ref = a.copy()
    ref[:, 0:6:2] = a[:, 1:6:2]
    np.testing.assert_array_equal(k(a), ref)


def test_view_dtype_scales_the_last_dimension() -> None:
    @nki.jit
    def k(a):
        u8 = a.view(nl.uint8)
        back = u8.slice(1, 4, 12).view(nl.float32)
        return _copy_out(u8), _copy_out(back)

    a = f32(3, 4)
    bytes_, back = k(a)
    np.testing.assert_array_equal(bytes_, a.view(np.uint8))
    np.testing.assert_array_equal(back, a[:, 1:3])


def test_pattern_metadata_follows_awss_example() -> None:
    seen = {}

    @nki.jit
    def k(a):
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        u = t.slice(dim=1, start=8, end=24)
        v = t.ap(pattern=[[64, 128], [1, 16]], offset=8)
        seen.update(u=(u.get_pattern(), u.offset), v=(v.get_pattern(), v.offset), strides=u.strides,
                    contiguous=(t.is_contiguous(), u.is_contiguous(), t.permute((0, 1)).is_contiguous()),
                    indirect=u.is_indirect(), size=u.size)
        return a

    k(f32(1, 1))
    assert seen["u"] == ([[64, 128], [1, 16]], 8)
    assert seen["v"] == seen["u"]
    assert seen["strides"] == (64, 1)
    assert seen["contiguous"] == (True, True, True)
    assert seen["indirect"] is False and seen["size"] == 128 * 16


# ---------------------------------------------------------------------------------------------------------
# .ap(): static patterns, offsets and dtypes
# ---------------------------------------------------------------------------------------------------------

AP_CASES = [
    ((8, 16), [[16, 4], [2, 8]], 1),
    ((8, 16), [[32, 4], [1, 4], [4, 4]], 3),
    ((8, 16), [[0, 3], [1, 16]], 16),  # stride 0 repeats a row
    ((2, 3, 4), [[1, 12], [12, 2]], 0),  # a transpose as a pattern
]


@pytest.mark.parametrize("case", range(len(AP_CASES)))
def test_ap_on_hbm_is_as_strided(case: int) -> None:
    shape, pattern, offset = AP_CASES[case]

    @nki.jit
    def k(a):
        return _copy_out(a.ap(pattern=pattern, offset=offset))

    a = f32(*shape)
    np.testing.assert_array_equal(k(a), pattern_ref(a, pattern, offset))


def test_ap_on_sbuf_reads_per_partition() -> None:
    @nki.jit
    def k(a):
        t = load(a)
        return _copy_out(t.ap(pattern=[[16, 16], [1, 8]], offset=8))

    a = f32(16, 16)
    np.testing.assert_array_equal(k(a), a[:, 8:16])


def test_ap_starts_at_the_views_offset() -> None:
    @nki.jit
    def k(a):
        inner = a.ap(pattern=[[16, 8], [2, 8]])
        return (_copy_out(a[2:4].ap(pattern=[[16, 2], [1, 4]], offset=1)),
                _copy_out(inner.ap(pattern=[[16, 8], [1, 4]])),
                _copy_out(a[3].ap(pattern=[[1, 5]])))

    a = f32(8, 16)
    sub, outer, row = k(a)
    np.testing.assert_array_equal(sub, a[2:4, 1:5])
    np.testing.assert_array_equal(outer, a[:, 0:4])  # .ap is not composable: inner's pattern has no effect
    np.testing.assert_array_equal(row, a[3, 0:5])


def test_ap_reinterprets_the_dtype() -> None:
    @nki.jit
    def k(a):
        t = load(a)
        return _copy_out(t.ap(pattern=[[8, 4], [1, 8]], offset=0, dtype=nl.bfloat16))

    a = np.arange(16, dtype=np.int32).reshape(4, 4) * 65537
    np.testing.assert_array_equal(k(a).view(np.uint16), a.view(np.uint16))
    assert k(a).dtype == ml_dtypes.bfloat16


def test_ap_as_destination() -> None:
    @nki.jit
    def k(a):
        out = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        t = load(a)
        nisa.dma_copy(dst=out.ap(pattern=[[8, 4], [2, 4]], offset=1), src=t.ap(pattern=[[8, 4], [1, 4]]))
        return out

    a = f32(4, 8)
    ref = a.copy()
    ref[:, 1::2] = a[:, 0:4]
    np.testing.assert_array_equal(k(a), ref)


# ---------------------------------------------------------------------------------------------------------
# dynamic offsets: scalar_offset, vector_offset, select with a tile, vector_select
# ---------------------------------------------------------------------------------------------------------

def _index_tile(values):
    """A (len(values), 1) int32 SBUF tile holding ``values`` (built with iota-free memsets)."""
    t = nl.ndarray((len(values), 1), dtype=nl.int32, buffer=nl.sbuf)
    for p, v in enumerate(values):
        nisa.memset(dst=t[p:p + 1, 0:1], value=v)
    return t


def test_scalar_offset_from_a_tile_follows_awss_formula() -> None:
    @nki.jit
    def k(a):
        idx = _index_tile([3 * 128 // 128])  # row block 3 of a (4*8, 16): offset + idx * prod(shape[1:])
        return _copy_out(a.ap(pattern=[[16, 8], [1, 8]], offset=4, scalar_offset=idx, indirect_dim=0))

    a = f32(32, 16)
    np.testing.assert_array_equal(k(a), pattern_ref(a, [[16, 8], [1, 8]], 4 + 3 * 16))


def test_scalar_offset_on_an_inner_dimension_and_from_a_register() -> None:
    @nki.jit
    def k(a):
        reg = nisa.register_alloc(2)
        return _copy_out(a.ap(pattern=[[24, 4], [1, 6]], scalar_offset=reg, indirect_dim=1))

    a = f32(4, 4, 6)
    np.testing.assert_array_equal(k(a), a[:, 2, :])


def test_vector_offset_gathers_rows() -> None:
    rows = [5, 0, 7, 7, 2]

    @nki.jit
    def k(a):
        idx = _index_tile(rows)
        return _copy_out(a.ap(pattern=[[12, len(rows)], [1, 12]], offset=0, vector_offset=idx, indirect_dim=0))

    a = f32(8, 12)
    np.testing.assert_array_equal(k(a), a[rows])


def _scatter_rows(a: np.ndarray, src: np.ndarray, rows: list, pattern: list, **dma_kwargs) -> np.ndarray:
    """``a`` with ``src``'s rows DMA'd into it through ``.ap(pattern, vector_offset=rows)``."""
    @nki.jit
    def k(a, src):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        dst = out.ap(pattern=pattern, vector_offset=_index_tile(rows), indirect_dim=0)
        nisa.dma_copy(dst=dst, src=load(src), **dma_kwargs)
        return out

    return k(a, src)


def test_vector_offset_scatters_rows() -> None:
    rows = [6, 1, 3]
    a, src = f32(8, 4), f32(3, 4) + 10
    ref = a.copy()
    ref[rows] = src
    np.testing.assert_array_equal(_scatter_rows(a, src, rows, [[4, 3], [1, 4]]), ref)


def test_select_and_vector_select_with_tiles() -> None:
    @nki.jit
    def k(a):
        one = _index_tile([2])
        picked = a.select(0, one)  # (6, 8): batch 2
        gathered = a.vector_select(0, _index_tile([3, 0, 3]))  # (3, 6, 8): batches 3, 0, 3
        return _copy_out(picked.slice(1, 2, 6)), _copy_out(gathered.select(2, 5))

    a = f32(4, 6, 8)
    picked, gathered = k(a)
    np.testing.assert_array_equal(picked, a[2][:, 2:6])
    np.testing.assert_array_equal(gathered, a[[3, 0, 3]][:, :, 5])


def test_dynamic_offsets_are_read_when_the_instruction_runs() -> None:
    @nki.jit
    def k(a):
        idx = _index_tile([0])
        view = a.ap(pattern=[[8, 1], [1, 8]], scalar_offset=idx, indirect_dim=0)  # built once, before the loop
        out = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in range(4):
            nisa.dma_copy(dst=out[i:i + 1, :], src=view)
            nisa.tensor_scalar(dst=idx, data=idx, op0=nl.add, operand0=1)
        return out

    a = f32(4, 8)
    np.testing.assert_array_equal(k(a), a)


# ---------------------------------------------------------------------------------------------------------
# a tensor is an object: comparisons with None and truth
# ---------------------------------------------------------------------------------------------------------

def test_a_tensor_compares_with_none_as_an_object() -> None:
    seen = {}

    @nki.jit
    def k(a, bias=None):
        t = load(a)
        seen.update(ne=t != None, eq=t == None, truth=bool(t), bias=bias != None)  # noqa: E711
        if t:
            seen["if"] = True
        return _copy_out(t == t)  # between tiles, == stays elementwise

    got = k(f32(2, 3))
    assert seen == {"ne": True, "eq": False, "truth": True, "bias": False, "if": True}
    np.testing.assert_array_equal(got, np.ones((2, 3)))


def test_a_legacy_tile_still_has_no_truth_value() -> None:
    @lnki.jit
    def k(a, b=None):
        t = lnl.load(a if b is None else b)
        if t:
            pass
        return a

    with pytest.raises(TypeError, match="no truth value"):
        k(f32(2, 3))

    # AWS's error page: an optional tensor parameter tested with `if b:` is err_ambiguous_tensor_truth_value
    # (AWS's own SDK tensor_scalar_cumulative example does it, against that rule).
    @lnki.jit
    def optional(a, b=None):
        return b if b else a

    with pytest.raises(TypeError, match="err_ambiguous_tensor_truth_value"):
        optional(f32(2, 3), f32(2, 3))


# ---------------------------------------------------------------------------------------------------------
# errors an author reads
# ---------------------------------------------------------------------------------------------------------

class TestMessages(TestCase):
    """The first line of each error (the second names the kernel line, which depends on this file's path)."""

    def message(self, body, *args) -> str:
        @nki.jit
        def k(a):
            body(a)
            return a

        with self.assertRaises((NKIError, TypeError)) as ctx:
            k(*(args or (f32(8, 16),)))
        return str(ctx.exception).splitlines()[0]

    def test_pattern_out_of_bounds(self):
        # Reported where an instruction reads the view (test_unused_out_of_bounds_view_is_legal).
        self.assertExpectedInline(self.message(lambda a: _copy_out(a.ap(pattern=[[16, 8], [1, 16]], offset=4))), """\
tensor view: access pattern [[16, 8], [1, 16]] at offset 4 addresses elements [4, 131] of a tensor of 128 elements [err_tensor_access_out_of_bound]""")

    def test_dynamic_offset_out_of_bounds(self):
        def body(a):
            idx = _index_tile([7])
            nisa.dma_copy(dst=load(a[0:2]), src=a.ap(pattern=[[16, 2], [1, 16]], scalar_offset=idx))
        self.assertExpectedInline(self.message(body), """\
.ap(scalar_offset=...) with a dynamic offset of 7: access pattern [[16, 2], [1, 16]] at offset 112 addresses elements [112, 143] of a tensor of 128 elements; dma_copy(oob_mode=nisa.oob_mode.skip) leaves them out [err_tensor_access_out_of_bound]""")

    def test_partition_step_of_an_sbuf_pattern(self):
        self.assertExpectedInline(
            self.message(lambda a: load(a).ap(pattern=[[32, 4], [1, 16]])), """\
.ap(pattern=[[32, 4], [1, 16]], offset=None): the first pair of an on-chip tensor's pattern walks its partitions, so its step must be the 16 elements of a partition (partitions are read contiguously), got 32 [err_invalid_access_pattern]""")

    def test_vector_offset_needs_hbm(self):
        self.assertExpectedInline(self.message(
            lambda a: load(a).ap(pattern=[[16, 2], [1, 16]], vector_offset=_index_tile([0, 1]))), """\
.ap(pattern=[[16, 2], [1, 16]], offset=None): vector_offset indexes an HBM tensor; this one is in sbuf [err_unsupported_memory]""")

    def test_scalar_and_vector_offsets_exclude_each_other(self):
        self.assertExpectedInline(self.message(lambda a: a.ap(
            pattern=[[16, 1], [1, 16]], scalar_offset=_index_tile([0]), vector_offset=_index_tile([0]))), """\
.ap(): scalar_offset and vector_offset are mutually exclusive [err_invalid_access_pattern]""")

    def test_float_offsets_are_refused(self):
        def body(a):
            idx = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
            a.ap(pattern=[[16, 1], [1, 16]], scalar_offset=idx)
        self.assertExpectedInline(self.message(body), """\
.ap(scalar_offset=...): a dynamic offset holds integers, got float32 [err_unsupported_dtype]""")

    def test_partition_dimension_stays_first(self):
        self.assertExpectedInline(self.message(lambda a: load(a).permute((1, 0))), """\
permute((1, 0)): the partition dimension of an on-chip or vector-selected tensor stays first (dims[0] must be 0) [err_invalid_view]""")

    def test_broadcast_needs_size_one(self):
        self.assertExpectedInline(self.message(lambda a: a.broadcast(1, 4)), """\
broadcast(dim=1, size=4): only a dimension of size 1 broadcasts, this one has size 16 [err_invalid_view]""")

    def test_flatten_needs_contiguous_dims(self):
        def body(a):
            a.reshape_dim(1, (4, 4)).permute((0, 2, 1)).flatten_dims(1, 2)
        self.assertExpectedInline(self.message(body), """\
flatten_dims(1, 2): dimensions 1 and 2 are not contiguous in memory (pattern [[16, 8], [1, 4], [4, 4]]) [err_invalid_view]""")

    def test_reshape_that_needs_a_copy(self):
        self.assertExpectedInline(self.message(lambda a: a.slice(1, 0, 8).reshape((64,))), """\
cannot reshape a view of shape (8, 8) (pattern [[16, 8], [1, 8]]) to (64,) without copying [err_invalid_reshape]""")

    def test_slice_out_of_bounds(self):
        self.assertExpectedInline(self.message(lambda a: a.slice(1, 4, 20)), """\
slice(dim=1, start=4, end=20, step=1) of a dimension of size 16: needs 0 <= start < end <= 16 and step >= 1 [err_tensor_access_out_of_bound]""")

    def test_dynamic_select_of_the_partition_dimension(self):
        self.assertExpectedInline(self.message(lambda a: load(a).select(0, _index_tile([1]))), """\
a dynamic select on an on-chip tensor cannot select its partition dimension (dim 0) [err_invalid_view]""")

    def test_one_dynamic_select_per_view(self):
        self.assertExpectedInline(self.message(
            lambda a: a.reshape_dim(1, (4, 4)).select(0, _index_tile([1])).select(0, _index_tile([2]))), """\
select: the view already has a dynamic offset; only one dynamic select per tensor (check t.is_indirect()) [err_invalid_view]""")

    def test_vector_selected_dimension_cannot_be_sliced(self):
        self.assertExpectedInline(self.message(lambda a: a.vector_select(0, _index_tile([1, 2])).slice(0, 0, 1)), """\
slice: dimension 0 of a vector-selected view is addressed indirectly and cannot be sliced or selected [err_invalid_view]""")

    def test_view_to_a_larger_dtype_needs_divisible_sizes(self):
        self.assertExpectedInline(self.message(lambda a: a.view(nl.uint8).slice(1, 1, 9).view(nl.float32)), """\
view(float32) of a uint8 view with pattern [[64, 8], [1, 8]] at offset 1: sizes, strides and offset must be divisible by 4 [err_invalid_view]""")

    def test_indirect_views_on_chip_tiles_only(self):
        # Tensor Indirection (tests/nki/test_indirect.py) gathers columns of SBUF/PSUM tiles, not HBM tensors.
        self.assertExpectedInline(self.message(lambda a: a.indirect(_index_tile([0]))), """\
.indirect(index) gathers or scatters an SBUF or PSUM tile, this one is in 'shared_hbm' [err_unsupported_memory]""")


def test_ap_on_a_strided_argument_counts_row_major_elements() -> None:
    """A kernel argument given as a transposed array: patterns address its elements in row-major order."""
    @nki.jit
    def k(a):
        out = nl.ndarray((3, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a.ap(pattern=[[8, 3], [2, 4]], offset=1))
        return out, _copy_out(a.slice(1, 2, 6).permute((1, 0)))

    a = f32(8, 6).T  # (6, 8), not C-contiguous
    got, view = k(a)
    np.testing.assert_array_equal(got, pattern_ref(a, [[8, 3], [2, 4]], 1))
    np.testing.assert_array_equal(view, a[:, 2:6].T)


def test_ds_with_a_register_or_tile_start() -> None:
    @nki.jit
    def k(a):
        reg = nisa.register_alloc(3)
        tile = _index_tile([5])
        return _copy_out(a[nl.ds(reg, 2), 1:4]), _copy_out(a[0:2, nl.ds(tile, 3)])

    a = f32(8, 10)
    rows, cols = k(a)
    np.testing.assert_array_equal(rows, a[3:5, 1:4])
    np.testing.assert_array_equal(cols, a[0:2, 5:8])


def test_views_of_a_directly_allocated_tile() -> None:
    """A tile placed by nki.compiler is a window of SBUF whose partitions are further apart than its free
    size: views and patterns still count its elements partition by partition."""
    import torchneuron_ext.nki.compiler as ncc

    @nki.jit
    def k(a):
        t = nl.ndarray((nl.par_dim(8), 12), dtype=a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=64))
        nisa.dma_copy(dst=t, src=a)
        seen = (t.offset, t.strides, t.reshape_dim(1, (3, 4)).get_pattern())
        assert seen == (0, (12, 1), [[12, 8], [4, 3], [1, 4]]), seen
        return (_copy_out(t.reshape_dim(1, (3, 4)).permute((0, 2, 1)).slice(2, 1, 3)),
                _copy_out(t.ap(pattern=[[12, 8], [3, 4]], offset=2)))

    a = f32(8, 12)
    view, pattern = k(a)
    np.testing.assert_array_equal(view, a.reshape(8, 3, 4).transpose(0, 2, 1)[:, :, 1:3])
    np.testing.assert_array_equal(pattern, a[:, 2::3])


def test_an_instruction_reads_a_broadcast_view_in_its_operands_shape() -> None:
    """tensor_tensor reads data2 with data1's shape: a stride-0 view no reshape could express is read as
    values (AWS's attention kernel subtracts a broadcast row max this way)."""
    @nki.jit
    def k(a, m):
        qk, mx = load(a), load(m)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=out, data1=qk, data2=mx.expand_dim(1).broadcast(1, 3), op=nl.subtract)
        return _copy_out(out)

    a, m = f32(4, 3 * 5), f32(4, 5)
    np.testing.assert_array_equal(k(a, m), a - np.tile(m, 3))


def test_vector_offset_out_of_bounds_rows() -> None:
    """A row index past the tensor is an error, or with oob_mode=skip a row left untransferred."""
    @nki.jit
    def k(a, skip):
        idx = _index_tile([1, 9, 0])
        t = nl.zeros((3, 4), dtype=a.dtype, buffer=nl.sbuf)
        src = a.ap(pattern=[[4, 3], [1, 4]], vector_offset=idx, indirect_dim=0)
        nisa.dma_copy(dst=t, src=src, oob_mode=nisa.oob_mode.skip if skip else nisa.oob_mode.error)
        return _copy_out(t)

    a = f32(8, 4)
    np.testing.assert_array_equal(k(a, True), np.stack([a[1], np.zeros(4, np.float32), a[0]]))
    with pytest.raises(NKIError) as info:
        k(a, False)
    assert str(info.value).splitlines()[0] == (
        ".ap(vector_offset=...): access pattern [[4, 3], [1, 4]] at offset 0 with vector offsets (times 4) reaches "
        "elements [0, 39] of a tensor of 32 elements; dma_copy(oob_mode=nisa.oob_mode.skip) leaves such rows out "
        "[err_tensor_access_out_of_bound]")


# Vector offsets whose rows lie inside an HBM tensor are read and written as rows of a window over it
# (access_pattern.row_window); element numbers remain for masks, read-modify-writes and rows out of bounds.

def _flat_rows(a: np.ndarray, starts: list, pattern: list) -> np.ndarray:
    """The elements of ``a`` each row of a vector-offset access reads: flat numbers start + the inner pattern."""
    flat = a.reshape(-1)
    inner = [np.arange(n) * s for s, n in pattern[1:]]
    offsets = sum(np.ix_(*inner)) if len(inner) > 1 else inner[0]
    return np.stack([flat[st + offsets] for st in starts])


def test_vector_offset_rows_may_overlap_and_have_inner_strides() -> None:
    rows, pattern = [3, 0, 4, 3, 1], [[2, 5], [3, 2], [1, 4]]  # rows of 2 x 4 elements, 2 apart: they overlap

    @nki.jit
    def k(a):
        return _copy_out(a.ap(pattern=pattern, offset=0, vector_offset=_index_tile(rows), indirect_dim=0))

    a = f32(8, 2)  # 16 elements; a row spans 7 of them, so row 4 (elements 8 to 14) is the last that fits
    np.testing.assert_array_equal(k(a), _flat_rows(a, [2 * r for r in rows], pattern))


def test_vector_offset_overlapping_rows_written_in_order() -> None:
    rows = [1, 2, 0]  # rows of 4 elements starting 2 apart: the later row wins
    a, src = f32(5, 2), f32(3, 4) + 10
    ref = a.copy().reshape(-1)
    for r, values in zip(rows, src):
        ref[2 * r:2 * r + 4] = values
    np.testing.assert_array_equal(_scatter_rows(a, src, rows, [[2, 3], [1, 4]]), ref.reshape(a.shape))


def test_vector_offset_accumulates_repeated_rows() -> None:
    rows = [2, 0, 2]
    a, src = f32(4, 4), f32(3, 4) + 10
    ref = a.copy()
    for r, values in zip(rows, src):
        ref[r] += values
    np.testing.assert_allclose(_scatter_rows(a, src, rows, [[4, 3], [1, 4]], dst_rmw_op=nl.add), ref, rtol=1e-6)


def test_vector_offset_rows_in_bounds_gather_whole_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-bounds rows never become element numbers (what made AWS's MoE gathers slow); the last row a tensor
    can hold still counts as inside."""
    from torchneuron_ext.nki import access_pattern

    rows = [7, 0, 3]

    @nki.jit
    def k(a):
        return _copy_out(a.ap(pattern=[[12, 3], [1, 12]], offset=0, vector_offset=_index_tile(rows), indirect_dim=0))

    def refuse(*args, **kwargs):
        raise AssertionError("element numbers for an in-bounds vector offset")

    monkeypatch.setattr(access_pattern, "flat_elements", refuse)
    a = f32(8, 12)
    np.testing.assert_array_equal(k(a), a[rows])


def test_integer_indexing_follows_nkitensor() -> None:
    seen = {}

    @nki.jit
    def k(a):
        t = nl.ndarray((16, 8, 4), dtype=a.dtype, buffer=nl.sbuf)
        seen.update(sbuf_p=t[3].shape, sbuf_f=t[:, 2].shape, sbuf_both=t[3, 2].shape, hbm_row=a[3].shape,
                    hbm_elem=a[3, 1].shape)
        return _copy_out(load(a)[5])

    a = f32(16, 8)
    np.testing.assert_array_equal(k(a), a[5:6])
    assert seen == {"sbuf_p": (1, 8, 4), "sbuf_f": (16, 4), "sbuf_both": (1, 4), "hbm_row": (8,),
                    "hbm_elem": (1,)}


# ---------------------------------------------------------------------------------------------------------
# bounds: checked where an instruction accesses a view (AWS: nki-aps.rst, "calling .ap does not do any
# computation"; dma_copy: dynamic addresses are checked during execution, oob_mode=skip skips them)
# ---------------------------------------------------------------------------------------------------------

def test_unused_out_of_bounds_view_is_legal() -> None:
    """A view reaching past its tensor that no instruction accesses is no error: AWS's output_projection_tkg
    builds one per loop step and guards the matmul, moe_cte reads only a pattern's .shape."""
    seen = {}

    @nki.jit
    def k(a):
        out = nl.ndarray((2, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        for step in range(4):
            view = a.ap(pattern=[[16, 2], [1, 16]], offset=step * 48)  # steps 3 reaches elements [144, 175]
            seen[step] = view.shape
            if step * 48 + 32 <= a.size:
                nisa.dma_copy(dst=out, src=view)
        return out

    a = f32(8, 16)
    np.testing.assert_array_equal(k(a), pattern_ref(a, [[16, 2], [1, 16]], 96))
    assert seen[3] == (2, 16)


def test_out_of_bounds_view_is_checked_again_after_slicing() -> None:
    """A view of an out-of-bounds view is checked for its own elements: slicing the part inside is legal."""
    @nki.jit
    def k(a):
        return _copy_out(a.ap(pattern=[[16, 9], [1, 16]])[0:8, 4:12])

    a = f32(8, 16)
    np.testing.assert_array_equal(k(a), a[:, 4:12])


@pytest.mark.parametrize("offset", [-1000000, 7, 5])
def test_scalar_offset_out_of_bounds_is_skipped(offset: int) -> None:
    """oob_mode=skip leaves untransferred the elements a dynamic scalar offset moves outside the tensor (AWS's
    indexed_flatten writes rows at offset -1000000 to skip them; moe_cte loads expert E with skip), and
    transfers the elements still inside."""
    @nki.jit
    def k(a):
        idx = _index_tile([offset])
        t = nl.ndarray((2, 16), dtype=a.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=-1.0)
        nisa.dma_copy(dst=t, src=a.ap(pattern=[[16, 2], [1, 16]], scalar_offset=idx, indirect_dim=0),
                      oob_mode=nisa.oob_mode.skip)
        return _copy_out(t)

    a = f32(6, 16)
    want = np.full((2, 16), -1.0, np.float32)
    if 0 <= offset < 6:
        want[0] = a[offset]
    np.testing.assert_array_equal(k(a), want)


def test_scalar_offset_out_of_bounds_write_is_skipped() -> None:
    """A DMA writing through an out-of-bounds scalar offset with skip leaves the destination alone."""
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        reg = nisa.register_alloc(-3)
        nisa.dma_copy(dst=out.ap(pattern=[[16, 2], [1, 16]], scalar_offset=reg, indirect_dim=0),
                      src=load(a[0:2]), oob_mode=nisa.oob_mode.skip)
        nisa.dma_copy(dst=out.ap(pattern=[[16, 2], [1, 16]], scalar_offset=reg, indirect_dim=0, offset=16 * 4),
                      src=load(a[2:4]), oob_mode=nisa.oob_mode.skip)  # rows 1 and 2
        return out

    a = f32(6, 16)
    want = a.copy()
    want[1:3] = a[2:4]
    np.testing.assert_array_equal(k(a), want)


def test_scalar_offset_out_of_bounds_still_fails_other_accesses() -> None:
    """Without skip, and for a compute instruction (no oob_mode), an out-of-bounds dynamic offset is an error."""
    @nki.jit
    def k(a):
        t = load(a)
        idx = _index_tile([-1])
        out = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=out, src=t.ap(pattern=[[16, 4], [1, 8]], scalar_offset=idx, indirect_dim=1))
        return _copy_out(out)

    with pytest.raises(NKIError, match=r"dynamic offset of -1: .*\[err_tensor_access_out_of_bound\]"):
        k(f32(4, 16))


def test_rank_id_is_a_dynamic_offset() -> None:
    """ncc.rank_id() is a register (AWS's NKI Library passes it as scalar_offset=; the compiler refuses
    arithmetic on it), so it is a dynamic offset and not a Python integer."""
    import torchneuron_ext.nki.collectives as ncc

    @nki.jit
    def k(a):
        rank = ncc.rank_id()
        with pytest.raises(TypeError, match="only known on the device"):
            int(rank)
        return _copy_out(a.ap(pattern=[[4, 2], [1, 4]], scalar_offset=rank, indirect_dim=0))

    a = f32(3, 2, 4)
    np.testing.assert_array_equal(k(a), a[0])  # a launch on its own is rank 0
