"""Access patterns: a tensor view as AWS's hardware describes it, ``[[step, num], ...]`` over an allocation.

An allocation's elements are numbered in row-major order (for an on-chip tile: partition ``p``, free
element ``f`` is number ``p * F + f``, ``F`` the elements of one partition). A view is a ``Layout``: an
element offset and, per dimension, a step (stride) and a count. Every view method of ``NKITensor`` is a
transformation of its layout, and ``realize`` turns a layout back into a numpy view of the allocation, so
instructions read and write through it like through any other tile.

A dynamic access (``.ap(scalar_offset=...)``, ``.ap(vector_offset=...)``, ``select`` with a tile index,
``vector_select``) adds an ``Indirection``: offsets held in a register or a tile, read when an instruction
accesses the view (``resolve``), as the DMA engine reads them when it runs.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional, Sequence

import numpy as np

from . import dtypes
from .data_address import data_address
from .errors import NKIUnsupportedError, fail

__all__ = ["Layout", "Indirection", "layout_of", "realize", "resolve", "contiguous_strides", "parse_pattern",
           "replace_dim", "infer_sizes", "reshape_strides"]


class Layout(NamedTuple):
    """Element offset, counts and steps (in elements of the view's dtype) over an allocation."""
    offset: int
    shape: tuple
    strides: tuple

    def pattern(self) -> list:
        return [[int(s), int(n)] for s, n in zip(self.strides, self.shape)]

    def last_element(self) -> int:
        return self.offset + sum((n - 1) * s for s, n in zip(self.strides, self.shape) if n > 0)


class Indirection(NamedTuple):
    """A dynamic offset: ``source`` (a register, or a tile of integers) times ``scale`` elements.

    ``kind`` 'scalar': one value moves the whole view. 'vector': value ``k`` of the (P, 1) tile moves the
    view's index ``k`` of dimension 0, replacing that dimension's step (AWS: only indirect_dim=0). 'tensor':
    Tensor Indirection (``t.indirect(index)``), ``source`` an indirection.TensorIndirection."""
    kind: str
    source: Any
    scale: int
    api: str  # what built it, for error messages: ".ap(...)", ".select(...)", ".vector_select(...)"


def contiguous_strides(shape: Sequence[int]) -> tuple:
    out, step = [], 1
    for n in reversed(tuple(shape)):
        out.append(step)
        step *= int(n)
    return tuple(reversed(out))


def parse_pattern(pattern: Any) -> "tuple[tuple, tuple]":
    """``[[step, num], ...]`` as (counts, steps), refusing anything else by name."""
    try:
        pairs = [tuple(p) for p in pattern]
    except TypeError:
        pairs = None
    if not pairs or any(len(p) != 2 for p in pairs):
        fail("err_invalid_access_pattern",
             f"an access pattern is a non-empty list of [step, num] pairs, got {pattern!r}")
    counts, steps = [], []
    for step, num in pairs:
        if not is_int(step) or not is_int(num):
            fail("err_invalid_access_pattern",
                 f"access pattern {_show(pattern)}: steps and counts are compile-time integers, got "
                 f"[{step!r}, {num!r}]")
        if int(num) < 1 or int(step) < 0:
            fail("err_invalid_access_pattern",
                 f"access pattern {_show(pattern)}: counts must be positive and steps non-negative")
        counts.append(int(num))
        steps.append(int(step))
    return tuple(counts), tuple(steps)


def is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _show(pattern: Any) -> str:
    try:
        return str([[int(a), int(b)] for a, b in pattern])
    except (TypeError, ValueError):
        return repr(pattern)


# -- layout transformations the view methods share ------------------------------------------------------

def replace_dim(layout: Layout, dim: int, sizes: Sequence[int], strides: Sequence[int]) -> Layout:
    return Layout(layout.offset, layout.shape[:dim] + tuple(sizes) + layout.shape[dim + 1:],
                  layout.strides[:dim] + tuple(strides) + layout.strides[dim + 1:])


def infer_sizes(shape: tuple, total: int, api: str) -> tuple:
    """``shape`` with at most one -1 worked out so that it holds ``total`` elements."""
    if any(not is_int(s) or (int(s) < 1 and int(s) != -1) for s in shape) or list(shape).count(-1) > 1:
        fail("err_invalid_reshape", f"{api}: sizes are positive integers, with at most one -1")
    known = int(np.prod([s for s in shape if s != -1]))
    if -1 in shape:
        if known == 0 or total % known:
            fail("err_invalid_reshape", f"{api}: {total} elements do not split into {shape}")
        shape = tuple(total // known if s == -1 else int(s) for s in shape)
    if int(np.prod(shape)) != total:
        fail("err_invalid_reshape", f"{api}: {total} elements cannot take the shape {shape}")
    return tuple(int(s) for s in shape)


def reshape_strides(layout: Layout, shape: tuple) -> Optional[tuple]:
    """The strides of ``shape`` over the same elements in the same order, or None if that needs a copy (the
    rule numpy applies: each group of old dimensions merged or split must be contiguous)."""
    old = [(n, s) for n, s in zip(layout.shape, layout.strides) if n != 1]
    new_dims = [n for n in shape if n != 1]
    out: list = []
    i = j = 0
    while i < len(old) and j < len(new_dims):
        np_, nn = old[i][0], new_dims[j]
        oi, nj = i, j
        while np_ != nn:
            if np_ < nn:
                i += 1
                np_ *= old[i][0]
            else:
                j += 1
                nn *= new_dims[j]
        for k in range(oi, i):
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None
        stride = old[i][1]
        group = []
        for k in range(j, nj - 1, -1):
            group.append(stride)
            stride *= new_dims[k]
        out.extend(reversed(group))
        i += 1
        j += 1
    strides, it = [], iter(out)
    for n in shape:
        strides.append(0 if n == 1 else next(it))
    return tuple(strides)


# -- the element space of an allocation ---------------------------------------------------------------------

def _geometry(array: np.ndarray, on_chip: bool, dtype: np.dtype) -> "tuple[int, int, int]":
    """(elements, elements per partition F, byte stride of a partition) of an allocation read as ``dtype``.

    Automatically allocated tensors are C-contiguous; a directly allocated tile is a (P, free) window of an
    arena whose partitions are further apart than F elements, so partitions are addressed by their own
    byte stride."""
    nbytes = array.dtype.itemsize * int(math.prod(array.shape))
    per_part_bytes = nbytes // array.shape[0] if (on_chip and array.ndim and array.shape[0]) else nbytes
    if per_part_bytes % dtype.itemsize:
        fail("err_invalid_view", f"an allocation of {per_part_bytes} bytes per partition cannot be read as "
                                 f"{dtypes.name(dtype)} ({dtype.itemsize}-byte) elements")
    f = per_part_bytes // dtype.itemsize
    if array.flags.c_contiguous or not on_chip:
        return nbytes // dtype.itemsize, f, f * dtype.itemsize
    return nbytes // dtype.itemsize, f, array.strides[0]


def layout_of(storage_array: np.ndarray, on_chip: bool, view: np.ndarray) -> Layout:
    """The layout of ``view``, a numpy view of ``storage_array`` (as made by basic indexing)."""
    size = view.dtype.itemsize
    if not storage_array.flags.c_contiguous and not on_chip:
        # A kernel argument given as a strided array: patterns count its elements in row-major order.
        if view.shape == storage_array.shape and view.strides == storage_array.strides \
                and data_address(view) == data_address(storage_array) and view.dtype == storage_array.dtype:
            return Layout(0, tuple(view.shape), contiguous_strides(view.shape))
        raise NKIUnsupportedError(
            f"a view method or .ap() on a slice of a non-contiguous HBM tensor (shape {storage_array.shape}, byte "
            f"strides {storage_array.strides}); call it on the tensor itself or pass a contiguous array")
    total, f, pstride = _geometry(storage_array, on_chip, view.dtype)
    padded = pstride != f * size

    def elements(nbytes: int) -> int:
        if padded:
            p, rem = divmod(nbytes, pstride)
            return p * f + rem // size
        return nbytes // size

    strides = []
    for s in view.strides:
        if padded and s and s % pstride == 0:
            strides.append((s // pstride) * f)
        else:
            strides.append(s // size)
    return Layout(elements(data_address(view) - data_address(storage_array)), tuple(view.shape), tuple(strides))


def realize(storage_array: np.ndarray, on_chip: bool, dtype: np.dtype, layout: Layout
            ) -> "tuple[np.ndarray, Optional[tuple]]":
    """The (array, index arrays) of the allocation's elements ``layout`` addresses (bounds already checked):
    a strided numpy view, or for an HBM tensor whose memory is not row-major (a kernel argument given as a
    strided array) the elements' positions in it, since a pattern counts elements in row-major order."""
    dtype = np.dtype(dtype)
    if not storage_array.flags.c_contiguous and not on_chip:
        if dtype != storage_array.dtype:
            raise NKIUnsupportedError(f"reinterpreting a non-contiguous HBM tensor (byte strides "
                                      f"{storage_array.strides}) as {dtypes.name(dtype)}; pass a contiguous array")
        return storage_array, tuple(np.unravel_index(flat_elements(layout), storage_array.shape))
    return _strided(storage_array, on_chip, dtype, layout), None


def flat_elements(layout: Layout, first: Optional[np.ndarray] = None) -> np.ndarray:
    """The element numbers ``layout`` addresses, shaped like it; ``first``: per index of dimension 0, its
    start instead of the pattern's step (a vector offset)."""
    n = len(layout.shape)
    flat = np.full((1,) * n, layout.offset, dtype=np.int64)
    for axis in range(n):
        shape = [1] * n
        shape[axis] = layout.shape[axis]
        if axis == 0 and first is not None:
            flat = flat + first.reshape(shape)
        else:
            flat = flat + (np.arange(layout.shape[axis], dtype=np.int64) * layout.strides[axis]).reshape(shape)
    return np.broadcast_to(flat, layout.shape)


def _strided(storage_array: np.ndarray, on_chip: bool, dtype: np.dtype, layout: Layout) -> np.ndarray:
    if storage_array.flags.c_contiguous:
        size = dtype.itemsize
        try:
            # Straight over the allocation's buffer: a quarter of as_strided's cost (which rebuilds the array
            # from its __array_interface__), and every view of every instruction operand is made here.
            return np.ndarray(layout.shape, dtype, buffer=storage_array, offset=layout.offset * size,
                              strides=tuple(s * size for s in layout.strides))
        except ValueError:  # an empty view past the end: numpy checks its offset against the buffer
            flat = storage_array.reshape(-1).view(np.uint8)
            if dtype != flat.dtype:
                flat = flat.view(dtype)
            return dtypes.as_strided(flat[layout.offset:], shape=layout.shape,
                                     strides=tuple(s * dtype.itemsize for s in layout.strides))
    total, f, pstride = _geometry(storage_array, on_chip, dtype)
    # A directly allocated tile: partitions are pstride bytes apart; free steps stay inside a partition.
    size = dtype.itemsize
    p0, f0 = divmod(layout.offset, f)
    strides, reach = [], f0
    for s, n in zip(layout.strides, layout.shape):
        if s and s % f == 0:
            strides.append((s // f) * pstride)
        else:
            strides.append(s * size)
            reach += (n - 1) * s
    if reach >= f:
        raise NKIUnsupportedError(
            f"access pattern {layout.pattern()} at offset {layout.offset} runs across partitions of a directly "
            f"allocated tile in its free dimensions; the simulator addresses such tiles per partition")
    owner = storage_array.base  # the arena a directly allocated tile is a window of
    if isinstance(owner, np.ndarray) and owner.flags.c_contiguous:
        start = data_address(storage_array) - data_address(owner) + p0 * pstride + f0 * size
        try:  # as for contiguous storage above, bounds-checked by numpy against the arena
            return np.ndarray(layout.shape, dtype, buffer=owner, offset=start, strides=tuple(strides))
        except ValueError:
            pass
    row = storage_array[p0]
    base = row.reshape(-1).view(np.uint8) if row.flags.c_contiguous else None
    if base is None:
        raise NKIUnsupportedError("an access pattern over a tile whose partitions are not contiguous")
    base = base[f0 * size:]
    if dtype != np.uint8:
        base = base[: (base.size // size) * size].view(dtype)
    return dtypes.as_strided(base, shape=layout.shape, strides=tuple(strides))


def check_bounds(layout: Layout, total: int, what: str) -> None:
    """Every element a static layout addresses lies inside the allocation."""
    if in_bounds(layout, total):
        return
    fail("err_tensor_access_out_of_bound",
         f"{what}: access pattern {layout.pattern()} at offset {layout.offset} addresses elements "
         f"[{layout.offset}, {layout.last_element()}] of a tensor of {total} elements")


def elements_of(storage_array: np.ndarray, on_chip: bool, dtype: np.dtype) -> int:
    return _geometry(storage_array, on_chip, np.dtype(dtype))[0]


def partition_elements(storage_array: np.ndarray, on_chip: bool, dtype: np.dtype) -> int:
    return _geometry(storage_array, on_chip, np.dtype(dtype))[1]


# -- dynamic offsets ----------------------------------------------------------------------------------------

def offset_values(source: Any, api: str) -> np.ndarray:
    """The integer values of a dynamic offset as the instruction reads them now."""
    read = getattr(source, "read_register", None)
    if read is not None:
        return np.asarray([read(api)], dtype=np.int64)
    return np.asarray(source.read(), dtype=np.int64).reshape(-1)


def resolve(storage_array: np.ndarray, on_chip: bool, dtype: np.dtype, layout: Layout,
            indirection: Optional[Indirection], per_element: bool = False) -> "tuple[np.ndarray, Optional[tuple]]":
    """The (array, index arrays) an access through ``layout`` with ``indirection`` touches now.

    An access inside the allocation is a strided numpy view. One that reaches outside it through a dynamic
    offset (scalar or vector) is given as flat element numbers, bounds checked by the access itself: AWS checks
    dynamic addresses when the DMA runs, so ``dma_copy(oob_mode=skip)`` leaves the out-of-bounds elements alone
    and any other access reports them (tensor.NKITensor._checked_index, with ``out_of_bounds_message``).

    Vector offsets whose rows all lie inside an HBM tensor are given as rows of a window (``row_window``)
    unless ``per_element``."""
    total = elements_of(storage_array, on_chip, dtype)
    if indirection is None:
        check_bounds(layout, total, "tensor view")
        return realize(storage_array, on_chip, dtype, layout)
    if indirection.kind == "tensor":  # Tensor Indirection (nki/indirection.py): the offsets pick the elements
        return _at_elements(storage_array, on_chip, dtype, indirection.source.flat_elements())
    values = offset_values(indirection.source, indirection.api)
    if indirection.kind == "scalar":
        moved = layout._replace(offset=layout.offset + int(values[0]) * indirection.scale)
        if in_bounds(moved, total):
            return realize(storage_array, on_chip, dtype, moved)
        return _element_access(storage_array, on_chip, dtype, flat_elements(moved))
    if values.size != layout.shape[0]:
        fail("err_shape_mismatch",
             f"{indirection.api}: {values.size} vector offsets for {layout.shape[0]} rows")
    if not per_element and not on_chip:
        rows = row_window(storage_array, dtype, layout, values * indirection.scale + layout.offset)
        if rows is not None:
            return rows
    return _element_access(storage_array, on_chip, dtype, flat_elements(layout, values * indirection.scale))


def row_window(storage_array: np.ndarray, dtype: np.dtype, layout: Layout, starts: np.ndarray
               ) -> "Optional[tuple[np.ndarray, tuple]]":
    """Vector offsets over a row-major allocation as (window, (starts,)): ``window[s]`` is the row the layout's
    other dimensions address from element ``s``, so the access is one gather of whole rows (an HBM gather of
    (128, 3584) bf16 took 0.6 ms as 458,752 element numbers). None unless every row lies inside the
    allocation (out-of-bounds rows are reported, or skipped, element by element: ``_element_access``) and
    the other dimensions' steps are not negative. Indexing only the first axis, it selects the same elements
    as the element numbers, in the same order; what needs them one by one (a mask, a read-modify-write, the
    dependency rules) asks for them (tensor.NKITensor._elementwise_index)."""
    if not storage_array.flags.c_contiguous or starts.ndim != 1 or not starts.size:
        return None
    inner, steps = layout.shape[1:], layout.strides[1:]
    if any(n == 0 for n in inner) or any(s < 0 for s in steps):
        return None
    dtype = np.dtype(dtype)
    total = storage_array.nbytes // dtype.itemsize
    count = total - sum((n - 1) * s for n, s in zip(inner, steps))  # the first elements a row can start at
    if count <= 0 or int(starts.min()) < 0 or int(starts.max()) >= count:
        return None
    size = dtype.itemsize
    window = np.ndarray((count,) + tuple(inner), dtype, buffer=storage_array, offset=0,
                        strides=(size,) + tuple(s * size for s in steps))
    return window, (starts,)


def in_bounds(layout: Layout, total: int) -> bool:
    return any(n == 0 for n in layout.shape) or (layout.offset >= 0 and layout.last_element() < total)


def out_of_bounds_message(layout: Layout, indirection: Indirection, lo: int, hi: int, extent: int,
                          total: int) -> str:
    """What an access through a dynamic offset that leaves the allocation reports (oob_mode=error)."""
    if indirection.kind == "scalar":
        value = int(offset_values(indirection.source, indirection.api)[0])
        moved = layout._replace(offset=layout.offset + value * indirection.scale)
        return (f"{indirection.api} with a dynamic offset of {value}: access pattern {moved.pattern()} at offset "
                f"{moved.offset} addresses elements [{moved.offset}, {moved.last_element()}] of a tensor of {total} "
                f"elements; dma_copy(oob_mode=nisa.oob_mode.skip) leaves them out")
    return (f"{indirection.api}: access pattern {layout.pattern()} at offset {layout.offset} with vector offsets "
            f"(times {indirection.scale}) reaches elements [{lo}, {hi}] of a tensor of {extent} elements; "
            f"dma_copy(oob_mode=nisa.oob_mode.skip) leaves such rows out")


def _element_access(storage_array: np.ndarray, on_chip: bool, dtype: np.dtype, flat: np.ndarray
                    ) -> "tuple[np.ndarray, tuple]":
    """(array, index arrays) of the element numbers ``flat``; numbers outside the allocation stay outside it
    (an out-of-range index), for the access to report or skip."""
    if not storage_array.flags.c_contiguous and not on_chip:
        return storage_array, (flat,) if storage_array.ndim == 1 else \
            _unravel_checked(flat, storage_array.shape)
    if storage_array.flags.c_contiguous:
        elems = storage_array.reshape(-1).view(np.uint8).view(dtype)
        return elems, (flat,)
    f = partition_elements(storage_array, on_chip, dtype)
    if np.dtype(dtype) != storage_array.dtype:
        raise NKIUnsupportedError("a dynamic-offset access pattern that reinterprets a directly allocated tile's "
                                  "dtype and leaves the tile")
    p, rest = np.divmod(flat, f)
    return storage_array, (p,) + tuple(np.unravel_index(rest, storage_array.shape[1:])) \
        if storage_array.ndim > 1 else (flat,)


def _at_elements(storage_array: np.ndarray, on_chip: bool, dtype: np.dtype, flat: np.ndarray
                 ) -> "tuple[np.ndarray, tuple]":
    """(array, index arrays) of an on-chip allocation's elements ``flat`` (in bounds), read as ``dtype``."""
    if storage_array.flags.c_contiguous:
        return storage_array.reshape(-1).view(np.uint8).view(dtype), (flat,)
    if np.dtype(dtype) != storage_array.dtype:
        raise NKIUnsupportedError("a Tensor Indirection view that reinterprets a directly allocated tile's dtype")
    p, rest = np.divmod(flat, partition_elements(storage_array, on_chip, dtype))
    return storage_array, (p,) + tuple(np.unravel_index(rest, storage_array.shape[1:]))


def _unravel_checked(flat: np.ndarray, shape: tuple) -> tuple:
    """Row-major positions of element numbers; numbers outside the tensor map to an out-of-range first index
    so that the access reports (or, with oob_mode=skip, leaves out) them."""
    total = int(np.prod(shape))
    inside = (flat >= 0) & (flat < total)
    idx = list(np.unravel_index(np.where(inside, flat, 0), shape))
    idx[0] = np.where(inside, idx[0], shape[0])
    return tuple(idx)
