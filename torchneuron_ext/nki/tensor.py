"""NKI tensors: a view of one allocation (HBM, SBUF or PSUM), indexed the way NKI indexes.

A tensor is an allocation (`Storage`), a numpy view of it after basic indexing, and optionally the
integer index arrays of advanced indexing (``nl.arange``/``nl.mgrid`` expressions), applied lazily so
that a masked access can leave out-of-bounds positions alone. Reading and writing go through
``read``/``write``, which enforce the bounds rules; engines (``engines/``) compute on what they read.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence

import numpy as np

from . import access_pattern as _ap
from . import dtypes, runtime
from . import indirection as _ti
from .access_pattern import Indirection, Layout
from .errors import NKIUnsupportedError, fail
from .indexing import DynSlice, IndexExpr, TileIndex
from .memory import Buffer, psum, sbuf, shared_hbm
from .rules import control_flow as _control_flow
from .rules import dependencies as _deps


def _plain_key(key: Any, ndim: int) -> Optional[tuple]:
    """``key`` as a tuple when it is only Python ints and slices, no longer than ``ndim``; else None."""
    items = key if type(key) is tuple else (key,)
    if len(items) > ndim:
        return None
    for k in items:
        if type(k) is not slice and type(k) is not int:
            return None
    return items


class NKITensor:
    """A tensor or tile inside a kernel. Partition dimension first for tiles in SBUF and PSUM."""

    __slots__ = ("storage", "arr", "index", "par_axis", "_shape", "_slices", "_updated", "_reduce_into", "_valid",
                 "_dyn")

    def __init__(self, storage: Any, arr: np.ndarray, index: Optional[tuple] = None, par_axis: int = 0) -> None:
        self.storage, self.arr, self.index, self.par_axis = storage, arr, index, par_axis
        self._slices = None
        # A view with a dynamic offset (access_pattern.Indirection): (layout, indirection, dtype). Its elements
        # are found again (_refresh) each time an instruction accesses it, as the hardware reads the offset.
        self._dyn: Optional[tuple] = None
        self._updated = False
        self._reduce_into: Optional[str] = None  # set by nl.loop_reduce: the op that folds it into its target
        # A legacy instruction's result under mask=: the positions it computed. Assigning or accumulating the
        # result writes only those, as a masked statement does on the device.
        self._valid: Optional[np.ndarray] = None
        if index is None:
            self._shape = arr.shape
        else:
            self._shape = np.broadcast_shapes(*(a.shape for a in index)) + arr.shape[len(index):]

    # -- metadata ------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self.arr.dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def itemsize(self) -> int:
        return self.arr.itemsize

    @property
    def buffer(self) -> Buffer:
        return self.storage.buffer

    @property
    def name(self) -> str:
        return self.storage.name

    def __len__(self) -> int:
        return self._shape[0]

    def __repr__(self) -> str:
        return f"NKITensor(shape={self._shape}, dtype={dtypes.name(self.dtype)}, buffer={self.buffer!r})"

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(
            "an NKI tensor is not a numpy array inside a kernel: load it (nl.load / nisa.dma_copy) and use "
            "nl.*/nisa.* operations on it")

    def __bool__(self) -> bool:
        # AWS's NkiTensor is a plain object: `if t:` is true, like `t is not None`. In the legacy dialect the
        # front end's rules decide (an optional tensor parameter tested with `if b:` is one of them).
        if _current_dialect() not in (None, "new"):
            return _control_flow.tile_truth_value(self)  # a do-while's condition, else the rule it breaks
        return True

    # -- indexing ------------------------------------------------------------
    def __getitem__(self, key: Any) -> "NKITensor":
        if self._dyn is not None:
            return self._index_dynamic(key)
        # Plain ints and slices, which is how kernels index tiles at nearly every instruction (three views per
        # nc_matmul in AWS's MoE kernels), need nothing resolved or normalised. Anything else (nl.ds, tiles,
        # index arrays, Ellipsis, numpy integers) is resolved first.
        plain = _plain_key(key, self.ndim)
        if plain is None:
            dynamic = _dynamic_ds(key)
            if dynamic is not None:
                return self._ds_dynamic(key, *dynamic)
            key = _normalize_key(key, self.ndim)
        else:
            key = plain
        if self.storage.blocks is not None and self.index is None:
            return self._block(key)
        if self.index is not None:
            return self._compose(key)
        if plain is None and any(isinstance(k, np.ndarray) for k in key):
            if any(isinstance(k, slice) for k in key):
                fail("err_unsupported_mixing_basic_advanced_tensor_indexing",
                     "Mixing basic tensor indexing (slices, nl.ds) and advanced tensor indexing (nl.arange, "
                     "nl.mgrid) is not supported: index every axis with arange/mgrid expressions or integers")
            arrays = []
            for k in key:
                if isinstance(k, IndexExpr) and k.ndim == 1 and len(key) > 1:
                    fail("err_1d_arange_not_supported",
                         "1d arange is not supported: lift it to a partition or free index with "
                         "nl.arange(n)[:, None] or nl.arange(n)[None, :]")
                arrays.append(np.asarray(k, dtype=np.int64) if not isinstance(k, np.ndarray) else k)
            return NKITensor(self.storage, self.arr, tuple(arrays), 0)
        return self._basic_view(key)

    def _basic_view(self, key: tuple) -> "NKITensor":
        """Basic indexing by ints and slices: check bounds (numpy would clip slices silently) and take a view."""
        out_key = []
        int_axes = []
        beyond = False  # a slice running past its dimension: checked at the access, which may be masked
        par_axis = self.par_axis
        for axis, k in enumerate(key):
            dim = self.arr.shape[axis]
            if isinstance(k, slice):
                start, stop, step = k.start, k.stop, k.step or 1
                if step <= 0:
                    fail("err_unsupported_negative_step", f"slice step must be positive, got {step}")
                start = 0 if start is None else int(start)
                stop = dim if stop is None else int(stop)
                if start < 0:
                    start += dim
                if stop < 0:
                    stop += dim
                if start < 0 or start > stop or (stop > dim and start >= dim):
                    fail("err_tensor_access_out_of_bound",
                         f"index range [{start}, {stop - 1}] exceed dimension size of {dim}")
                beyond = beyond or stop > dim
                out_key.append(slice(start, stop, step))
            else:
                i = int(k)
                if i < 0:
                    i += dim
                if not 0 <= i < dim:
                    fail("err_tensor_access_out_of_bound", f"index {int(k)} exceed dimension size of {dim}")
                out_key.append(i)
                int_axes.append(axis)
                if axis < self.par_axis:
                    par_axis -= 1
        # An integer index drops its axis, except that a tensor of rank >= 2 stays a tile of rank 2: the
        # last integer-indexed axes are kept with size 1 (``stats[:, 0]`` is (P, 1), ``a[0:128, j]`` a
        # per-partition column, ``a[i, 0:512]`` one row), as the toolchain shapes such tiles.
        if int_axes and self.par_axis == 0 and _current_dialect() == "new":
            # AWS's NkiTensor: an integer keeps an on-chip tensor's partition dimension (size 1) and drops
            # any other axis; an HBM tensor drops every integer-indexed axis and stays at least 1-D.
            if self.buffer.on_chip and int_axes[0] == 0:
                out_key[0] = slice(out_key[0], out_key[0] + 1)
                int_axes = int_axes[1:]
            # On chip a tensor stays at least 2-D: when dropping every integer-indexed free axis would leave
            # only the partitions, the last of them is kept at size 1 (AWS's language guide: ``t[:, 0, 10]``
            # of a (64, 64, 64) tile is (64, 1)).
            if self.buffer.on_chip and int_axes and self.arr.ndim - len(int_axes) < 2:
                i = out_key[int_axes[-1]]
                out_key[int_axes[-1]] = slice(i, i + 1)
                int_axes = int_axes[:-1]
            if len(int_axes) == self.arr.ndim:
                i = out_key[int_axes[-1]]
                out_key[int_axes[-1]] = slice(i, i + 1)
            if beyond:
                return self._deferred_bounds(out_key)
            return NKITensor(self.storage, self.arr[tuple(out_key)], None, 0)
        rank = self.arr.ndim - len(int_axes)
        if int_axes and rank < 2 and self.arr.ndim >= 2:
            for axis in reversed(int_axes[-(2 - rank):]):
                i = out_key[axis]
                out_key[axis] = slice(i, i + 1)
                if axis < self.par_axis:
                    par_axis += 1
        if beyond:
            return self._deferred_bounds(out_key)
        return NKITensor(self.storage, self.arr[tuple(out_key)], None, max(par_axis, 0))

    def _deferred_bounds(self, key: list) -> "NKITensor":
        """A slice past the end of its axis, as the tiled kernels write for a last partial tile
        (``x[i*128:(i+1)*128]`` with ``mask=(i*128 + i_p < n)``): the same elements as index arrays, so the
        access checks bounds itself and a mask can leave the outside positions alone."""
        n_sliced = sum(isinstance(k, slice) for k in key)
        arrays, j = [], 0
        for k in key:
            if isinstance(k, slice):
                shape = [1] * n_sliced
                shape[j] = -1
                arrays.append(np.arange(k.start, k.stop, k.step, dtype=np.int64).reshape(shape))
                j += 1
            else:
                arrays.append(np.asarray(k, dtype=np.int64))
        return NKITensor(self.storage, self.arr, tuple(arrays), 0)

    def _block(self, key: tuple) -> "NKITensor":
        """``t[b]`` of a directly allocated tensor: the physical tile its allocation put block ``b`` in
        (blocks a modulo allocation maps to one tile share it), indexed further by the rest of the key."""
        nb = self.par_axis
        idx = []
        for axis, k in enumerate(key[:nb]):
            if isinstance(k, np.ndarray) and k.size == 1:
                k = int(k.reshape(-1)[0])
            if not isinstance(k, (int, np.integer)):
                raise NKIUnsupportedError(
                    f"a directly allocated tensor ({self.storage.name or 'nki.compiler allocation'}, shape "
                    f"{self.shape}) is indexed by {k!r} on block dimension {axis}: the simulator selects blocks "
                    f"of such tensors by integer indices (t[i_block, ...]) only")
            dim = self._shape[axis]
            i = int(k) + dim if int(k) < 0 else int(k)
            if not 0 <= i < dim:
                fail("err_tensor_access_out_of_bound", f"index {int(k)} exceed dimension size of {dim}")
            idx.append(i)
        if len(idx) < nb:
            raise NKIUnsupportedError(
                f"a directly allocated tensor of shape {self.shape} has {nb} block dimensions; index all of "
                f"them with integers to get a tile")
        tile = self.storage.blocks[tuple(idx)]
        t = NKITensor(tile, tile.array, None, 0)
        rest = key[nb:]
        return t[rest] if rest else t

    def _compose(self, key: tuple) -> "NKITensor":
        full = self._full_index()
        return NKITensor(self.storage, self.arr, tuple(np.asarray(a)[key] for a in full), 0)

    def _full_index(self) -> list:
        """Index arrays for every axis of ``arr`` that reproduce this tensor's elements."""
        lead = np.broadcast_shapes(*(a.shape for a in self.index))
        trailing = self.arr.shape[len(self.index):]
        n = len(lead) + len(trailing)
        out = [np.broadcast_to(a.reshape(a.shape + (1,) * len(trailing)), lead + trailing) for a in self.index]
        for j, size in enumerate(trailing):
            shape = [1] * n
            shape[len(lead) + j] = size
            out.append(np.broadcast_to(np.arange(size).reshape(shape), lead + trailing))
        return out

    # -- access --------------------------------------------------------------
    def _fast_slices(self) -> Optional[tuple]:
        """arange/mgrid index arrays that walk axes in order are plain slices: use a view."""
        if self._slices is not None:
            return self._slices or None
        slices = []
        n = len(self.index)
        for axis, a in enumerate(self.index):
            if a.ndim != n or any(s != 1 for j, s in enumerate(a.shape) if j != axis):
                self._slices = ()
                return None
            flat = a.reshape(-1)
            start = int(flat[0])
            step = int(flat[1] - flat[0]) if flat.size > 1 else 1
            dim = self.arr.shape[axis]
            last = start + step * (flat.size - 1)
            if step <= 0 or start < 0 or last >= dim or (
                    flat.size > 2 and not np.array_equal(flat, np.arange(start, last + 1, step))):
                self._slices = ()
                return None
            slices.append(slice(start, last + 1, step))
        self._slices = tuple(slices)
        return self._slices

    def _checked_index(self, mask: Optional[np.ndarray], skip: bool = False) -> "tuple[tuple, Any]":
        """Index arrays with masked-out positions made safe, and the positions accessed (None: all).
        Unmasked out-of-bounds positions raise, or with ``skip`` (DMA's oob_mode=skip) are left out. With a
        mask, ``self.arr`` may change (read it after the call)."""
        if mask is not None:
            self._elementwise_index()
        lead = np.broadcast_shapes(*(a.shape for a in self.index))
        valid = None if mask is None else _mask_to(mask, lead)
        dims = self.arr.shape
        bad = [axis for axis, a in enumerate(self.index)
               if a.size and (int(a.min()) < 0 or int(a.max()) >= dims[axis])]
        if not bad:
            return self.index, valid
        if skip:
            inside = np.ones(lead, dtype=bool)
            for axis in bad:
                b = np.broadcast_to(self.index[axis], lead)
                inside &= (b >= 0) & (b < dims[axis])
            valid = inside if valid is None else valid & inside
        out = []
        for axis, a in enumerate(self.index):
            if axis not in bad:
                out.append(a)
                continue
            b = np.broadcast_to(a, lead)
            if valid is not None:
                inside = b[valid]
                lo, hi = (int(inside.min()), int(inside.max())) if inside.size else (0, 0)
            else:
                lo, hi = int(a.min()), int(a.max())
            if lo < 0 or hi >= dims[axis]:
                if self._dyn is not None and self._dyn[1] is not None:
                    layout, ind = self._dyn[0], self._dyn[1]
                    fail("err_tensor_access_out_of_bound", _ap.out_of_bounds_message(
                        layout, ind, lo, hi, dims[axis],
                        _ap.elements_of(self.storage.array, self.buffer.on_chip, self._dyn[2])))
                fail("err_tensor_access_out_of_bound",
                     f"index range [{lo}, {hi}] exceed dimension size of {dims[axis]}; if only part of the tile "
                     f"is in bounds, pass mask= (for example mask=(i * 128 + i_p < {dims[axis]}))")
            out.append(np.where(valid, b, 0))
        return tuple(out), valid

    def _touch(self, reading: bool = True) -> None:
        """Stamp the access on the tile's live range (runtime.Launch._account). An instruction reads its
        operands before it is counted and writes its results after, so both are stamped with its number."""
        rec = self.storage.live
        if rec is not None:
            if not isinstance(rec, list):  # runtime.BlockLive: a tensor with block dimensions
                owner = rec.clock_owner
                rec.stamp(self.arr, owner.clock + 1 if reading else owner.clock)
                return
            clock = rec[4].clock + 1 if reading else rec[4].clock
            if rec[0] is None:
                rec[0] = clock
            rec[1] = clock

    def _mark_defined(self, mask: Optional[np.ndarray]) -> None:
        """PSUM: these positions now hold written data (engines.accumulate)."""
        flags = self.storage.flags(self.arr, "defined")
        if self.index is None:
            if mask is None:
                flags[...] = True
            else:
                flags[np.broadcast_to(_mask_to(mask, self.arr.shape), self.arr.shape)] = True
        else:
            flags[self._checked_index(None, skip=True)[0]] = True

    def _elementwise_index(self) -> None:
        """A dynamic view resolved as rows of a window (access_pattern.row_window) made element numbers: for a
        mask (over elements, where a partial index masks whole rows) or a read-modify-write."""
        if self._dyn is not None and self.index is not None and len(self.index) < self.arr.ndim:
            layout, indirection, dtype = self._dyn
            self.arr, self.index = _ap.resolve(self.storage.array, self.buffer.on_chip, dtype, layout, indirection,
                                               per_element=True)
            self._slices = None

    def _refresh(self) -> None:
        """A dynamic view: find its elements from the offsets' current values."""
        layout, indirection, dtype = self._dyn
        self.arr, self.index = _ap.resolve(self.storage.array, self.buffer.on_chip, dtype, layout, indirection)
        self._slices = None

    def read(self, mask: Optional[np.ndarray] = None) -> np.ndarray:
        """The values (a view when possible: do not write into it)."""
        if self._dyn is not None:
            self._refresh()
        if _deps.active:
            _deps.note_access(self, False)
        if self.storage.live is not None:
            self._touch()
        _schedule_access(self.storage, self.arr, False)
        if self.index is None:
            return self.arr
        slices = self._fast_slices()
        if slices is not None:
            return self.arr[slices]
        index = self._checked_index(mask)[0]
        return self.arr[index]

    def note_write(self, mask: Optional[np.ndarray] = None, defined: bool = False) -> None:
        """What a write does besides storing the values (the schedule, dependency and live-range records, PSUM's
        flags): for an engine that stores into ``self.arr`` itself, later (engines/products.py)."""
        self.storage.written = True
        if self._dyn is not None:
            self._refresh()
        if _deps.active:
            _deps.note_access(self, True, mask)
        if self.storage.live is not None:
            self._touch(reading=False)
        _schedule_access(self.storage, self.arr, True)
        if self.storage.psum_defined is not None and not defined:
            self._mark_defined(mask)

    def read_valid(self, mask: Optional[np.ndarray] = None, skip: bool = False) -> "tuple[np.ndarray, Any]":
        """The values and which of them were read (None: all): out-of-bounds positions are skipped, not
        errors, with ``skip``."""
        if self._dyn is not None:
            self._refresh()
        if self.index is None or self._fast_slices() is not None:
            return self.read(mask), None
        self._touch()
        _schedule_access(self.storage, self.arr, False)
        idx, valid = self._checked_index(mask, skip)
        return self.arr[idx], valid

    def write(self, values: Any, mask: Optional[np.ndarray] = None, skip: bool = False,
              rmw: Optional[Callable] = None, defined: bool = False) -> None:
        """Store ``values`` (already in this tensor's dtype, broadcastable to its shape, or of its element
        count: a (128, 1) tile stored into a (128,) HBM vector). ``rmw``: a binary numpy function; the memory
        becomes ``rmw(memory, values)`` (computed in fp32), each occurrence of a repeated index in turn, as
        the DMA engine's read-modify-write does. ``defined``: the caller knows every PSUM position written is
        already marked written (a matmul accumulating into started positions), so the flags are left alone."""
        self.note_write(mask, defined)
        if rmw is not None:
            self._elementwise_index()
        values = _fit(values, self._shape)
        if self.index is None or self._fast_slices() is not None:
            target = self.arr if self.index is None else self.arr[self._slices]
            if rmw is not None:
                values = dtypes.cast(np.asarray(rmw(target.astype(np.float32), np.asarray(values, np.float32))),
                                     target.dtype)
            if mask is None:
                target[...] = values
            else:
                np.copyto(target, np.broadcast_to(values, target.shape), where=_mask_to(mask, target.shape))
            return
        idx, valid = self._checked_index(mask, skip)
        lead = np.broadcast_shapes(*(a.shape for a in idx))
        vals = np.broadcast_to(values, self._shape)
        if valid is not None:
            idx = tuple(np.broadcast_to(a, lead)[valid] for a in idx)
            vals = vals[valid]
        if rmw is None:
            self.arr[idx] = vals
            return
        ufunc = rmw if isinstance(rmw, np.ufunc) else None
        if ufunc is None:
            raise NKIUnsupportedError(f"read-modify-write with {rmw!r} through indirect indices: use a numpy ufunc "
                                      f"such as np.add or np.maximum")
        work = self.arr.astype(np.float32)
        ufunc.at(work, idx, np.asarray(vals, dtype=np.float32))
        self.arr[...] = dtypes.cast(work, self.arr.dtype)

    # -- views: AWS's NkiTensor methods. Each is a transformation of the view's access pattern (a Layout over
    # the allocation's elements, access_pattern.py); none copies data. ---------------------------------------
    @property
    def strides(self) -> tuple:
        """Per dimension, the step between neighbouring elements, in elements of the allocation."""
        return self._layout("strides").strides

    @property
    def offset(self) -> int:
        """The element of the allocation this view starts at."""
        return self._layout("offset").offset

    @property
    def size(self) -> int:
        return int(np.prod(self._shape))

    def get_pattern(self) -> list:
        """The view's access pattern ``[[stride, count], ...]``, one pair per dimension."""
        return self._layout("get_pattern").pattern()

    def is_contiguous(self) -> bool:
        """Whether the view covers its elements in row-major order (per partition for on-chip tensors)."""
        layout = self._layout("is_contiguous")
        start = 1 if self.buffer.on_chip else 0
        expected = 1
        for n, s in reversed(list(zip(layout.shape[start:], layout.strides[start:]))):
            if n != 1 and s != expected:
                return False
            expected *= n
        return True

    def is_indirect(self) -> bool:
        """Whether the view carries a dynamic offset (a select with a tile, vector_select, .ap offsets)."""
        return self._dyn is not None and self._dyn[1] is not None

    def slice(self, dim: int, start: int, end: int, step: int = 1) -> "NKITensor":
        """``t.slice(1, a, b, s)`` is ``t[:, a:b:s]``: 0 <= start < end <= shape[dim], step >= 1."""
        layout = self._layout("slice")
        dim = self._dim(dim, "slice")
        self._not_vector_dim(dim, "slice")
        for name, v in (("start", start), ("end", end), ("step", step)):
            if not _ap.is_int(v):
                fail("err_invalid_view", f"slice({name}={v!r}): slice bounds are compile-time integers; for a "
                                         f"runtime offset use .select(dim, index_tile) or .ap(scalar_offset=...)")
        n = self._shape[dim]
        if not 0 <= start < end <= n or step < 1:
            fail("err_tensor_access_out_of_bound",
                 f"slice(dim={dim}, start={start}, end={end}, step={step}) of a dimension of size {n}: needs "
                 f"0 <= start < end <= {n} and step >= 1")
        shape, strides = list(layout.shape), list(layout.strides)
        shape[dim] = (end - start + step - 1) // step
        strides[dim] *= step
        return self._derive(Layout(layout.offset + start * layout.strides[dim], tuple(shape), tuple(strides)))

    def select(self, dim: int, index: Any) -> "NKITensor":
        """Remove ``dim`` by taking one index of it: an int, or a one-element integer tile (or register) read
        when an instruction accesses the view."""
        layout = self._layout("select")
        dim = self._dim(dim, "select")
        self._not_vector_dim(dim, "select")
        shape = layout.shape[:dim] + layout.shape[dim + 1:]
        strides = layout.strides[:dim] + layout.strides[dim + 1:]
        if _ap.is_int(index):
            n = self._shape[dim]
            if not 0 <= int(index) < n:
                fail("err_tensor_access_out_of_bound", f"select(dim={dim}, index={int(index)}) of a dimension "
                                                       f"of size {n}")
            if dim == 0 and self.buffer.on_chip:
                fail("err_invalid_view", "select(dim=0) of an on-chip tensor would remove its partition "
                                         "dimension; slice it (t.slice(0, i, i + 1)) instead")
            return self._derive(Layout(layout.offset + int(index) * layout.strides[dim], shape, strides))
        if dim == 0 and self.buffer.on_chip:
            fail("err_invalid_view", "a dynamic select on an on-chip tensor cannot select its partition "
                                     "dimension (dim 0)")
        self._not_indirect("select")
        if layout.strides[dim] == 0:
            fail("err_invalid_view", f"select(dim={dim}, <tile>): a broadcast dimension (stride 0) has no "
                                     f"dynamic index")
        _scalar_offset_source(index, ".select(dim, index)")
        return self._derive(Layout(layout.offset, shape, strides),
                            indirection=Indirection("scalar", index, layout.strides[dim], ".select(dim, index)"))

    def vector_select(self, dim: int, vector_offset: "NKITensor") -> "NKITensor":
        """Row ``p`` of the view is row ``vector_offset[p]`` of dimension 0 (an HBM gather)."""
        layout = self._layout("vector_select")
        if dim != 0:
            fail("err_invalid_view", f"vector_select(dim={dim}): only dim 0 can be vector-selected")
        if not self.buffer.is_hbm:
            fail("err_unsupported_memory", "vector_select is only supported on HBM tensors")
        self._not_indirect("vector_select")
        if layout.strides[0] == 0 or any(s > layout.strides[0] for s in layout.strides):
            fail("err_invalid_view", "vector_select: dim 0 must have the largest stride of the view (no "
                                     "broadcast or permute of it before vector_select)")
        rows = _vector_offset_source(vector_offset, ".vector_select")
        return self._derive(Layout(layout.offset, (rows,) + layout.shape[1:], layout.strides),
                            indirection=Indirection("vector", vector_offset, layout.strides[0], ".vector_select"))

    def permute(self, *dims: Any) -> "NKITensor":
        """Reorder the dimensions (``dims`` a permutation); the partition dimension of on-chip tensors stays."""
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        layout = self._layout("permute")
        if sorted(int(d) for d in dims) != list(range(self.ndim)):
            fail("err_invalid_view", f"permute({tuple(dims)}) is not a permutation of the {self.ndim} dimensions")
        if dims and dims[0] != 0 and (self.buffer.on_chip or self._vector_indirect()):
            fail("err_invalid_view", f"permute({tuple(dims)}): the partition dimension of an on-chip or "
                                     f"vector-selected tensor stays first (dims[0] must be 0)")
        return self._derive(Layout(layout.offset, tuple(layout.shape[d] for d in dims),
                                   tuple(layout.strides[d] for d in dims)))

    def broadcast(self, dim: int, size: int) -> "NKITensor":
        """A size-1 dimension repeated ``size`` times (stride 0)."""
        layout = self._layout("broadcast")
        dim = self._dim(dim, "broadcast")
        if self._shape[dim] != 1:
            fail("err_invalid_view", f"broadcast(dim={dim}, size={size}): only a dimension of size 1 broadcasts, "
                                     f"this one has size {self._shape[dim]}")
        if dim == 0 and (self.buffer.on_chip or self._vector_indirect()):
            fail("err_invalid_view", "broadcast cannot repeat the partition dimension (dim 0) of an on-chip "
                                     "tensor")
        return self._derive(_ap.replace_dim(layout, dim, [int(size)], [0]))

    def expand_dim(self, dim: int) -> "NKITensor":
        """A new dimension of size 1 at ``dim``."""
        layout = self._layout("expand_dim")
        if not _ap.is_int(dim) or not 0 <= dim <= self.ndim:
            fail("err_invalid_view", f"expand_dim({dim!r}) of a tensor with {self.ndim} dimensions")
        if dim == 0 and (self.buffer.on_chip or self._vector_indirect()):
            fail("err_invalid_view", "expand_dim(0) would move the partition dimension of an on-chip tensor")
        stride = layout.strides[dim] * layout.shape[dim] if dim < self.ndim else 1
        return self._derive(Layout(layout.offset, layout.shape[:dim] + (1,) + layout.shape[dim:],
                                   layout.strides[:dim] + (stride,) + layout.strides[dim:]))

    def squeeze_dim(self, dim: int) -> "NKITensor":
        """Remove a dimension of size 1."""
        layout = self._layout("squeeze_dim")
        dim = self._dim(dim, "squeeze_dim")
        if self._shape[dim] != 1:
            fail("err_invalid_view", f"squeeze_dim({dim}): the dimension has size {self._shape[dim]}, not 1")
        if dim == 0 and (self.buffer.on_chip or self._vector_indirect()):
            fail("err_invalid_view", "squeeze_dim(0) would remove the partition dimension of an on-chip tensor")
        return self._derive(_ap.replace_dim(layout, dim, [], []))

    def reshape_dim(self, dim: int, shape: Sequence[int]) -> "NKITensor":
        """Split ``dim`` into ``shape`` (one entry may be -1)."""
        layout = self._layout("reshape_dim")
        dim = self._dim(dim, "reshape_dim")
        sizes = _ap.infer_sizes(tuple(shape), self._shape[dim], f"reshape_dim({dim}, {tuple(shape)})")
        if dim == 0 and len(sizes) != 1 and (self.buffer.on_chip or self._vector_indirect()):
            fail("err_invalid_view", f"reshape_dim(0, {tuple(shape)}): the partition dimension of an on-chip "
                                     f"tensor cannot be split")
        inner = _ap.contiguous_strides(sizes)
        return self._derive(_ap.replace_dim(layout, dim, sizes, [s * layout.strides[dim] for s in inner]))

    def flatten_dims(self, start_dim: int, end_dim: int) -> "NKITensor":
        """Merge dimensions start_dim..end_dim (inclusive), which must be contiguous in memory."""
        layout = self._layout("flatten_dims")
        start_dim, end_dim = self._dim(start_dim, "flatten_dims"), self._dim(end_dim, "flatten_dims")
        if start_dim > end_dim:
            fail("err_invalid_view", f"flatten_dims({start_dim}, {end_dim}): start_dim must not exceed end_dim")
        if start_dim == 0 and end_dim > 0 and (self.buffer.on_chip or self._vector_indirect()):
            fail("err_invalid_view", "flatten_dims cannot merge the partition dimension (dim 0) of an on-chip "
                                     "tensor")
        for i in range(start_dim, end_dim):
            if layout.strides[i] != layout.shape[i + 1] * layout.strides[i + 1]:
                fail("err_invalid_view", f"flatten_dims({start_dim}, {end_dim}): dimensions {i} and {i + 1} are "
                                         f"not contiguous in memory (pattern {layout.pattern()})")
        merged = int(np.prod(layout.shape[start_dim:end_dim + 1]))
        return self._derive(Layout(layout.offset, layout.shape[:start_dim] + (merged,) + layout.shape[end_dim + 1:],
                                   layout.strides[:start_dim] + (layout.strides[end_dim],)
                                   + layout.strides[end_dim + 1:]))

    def reshape(self, shape: Any) -> "NKITensor":
        """The same elements in another shape, when the view's layout allows it without a copy."""
        if isinstance(shape, (int, np.integer)):
            shape = (shape,)
        if self.index is not None and self._dyn is None:
            fail("err_invalid_reshape", "only a contiguous tensor (no advanced indexing) can be reshaped")
        shape = _ap.infer_sizes(tuple(shape), self.size, f"reshape({tuple(shape)})")
        if self.storage.blocks is not None and self.par_axis:
            fail("err_invalid_reshape", "a tensor with block dimensions cannot be reshaped; index a block first")
        layout = self._layout("reshape")
        if (self.buffer.on_chip or self._vector_indirect()) and shape[0] != self._shape[0]:
            fail("err_invalid_reshape", f"reshape of an on-chip tensor {self._shape} to {shape} must keep the "
                                        f"partition dimension ({self._shape[0]})")
        strides = _ap.reshape_strides(layout, shape)
        if strides is None:
            fail("err_invalid_reshape", f"cannot reshape a view of shape {self._shape} (pattern "
                                        f"{layout.pattern()}) to {shape} without copying")
        return self._derive(Layout(layout.offset, shape, strides))

    def rearrange(self, src_pattern: tuple, dst_pattern: tuple,
                  fixed_sizes: Optional[dict] = None) -> "NKITensor":
        """einops-style: split grouped source dimensions, reorder, merge grouped destination dimensions."""
        fixed = dict(fixed_sizes or {})
        if len(src_pattern) != self.ndim:
            fail("err_invalid_view", f"rearrange: source pattern {src_pattern} names {len(src_pattern)} dimensions, "
                                     f"the tensor has {self.ndim}")
        t, names, dim = self, [], 0
        for entry in src_pattern:
            if isinstance(entry, (tuple, list)):
                t = t.reshape_dim(dim, tuple(fixed.get(n, -1) for n in entry))
                names.extend(entry)
                dim += len(entry)
            else:
                names.append(entry)
                dim += 1
        flat_dst = [n for e in dst_pattern for n in (e if isinstance(e, (tuple, list)) else (e,))]
        if sorted(flat_dst) != sorted(names) or len(set(names)) != len(names):
            fail("err_invalid_view", f"rearrange: {src_pattern} -> {dst_pattern} must name the same dimensions, "
                                     f"each once")
        t = t.permute(tuple(names.index(n) for n in flat_dst))
        dim = 0
        for entry in dst_pattern:
            if isinstance(entry, (tuple, list)):
                if len(entry) > 1:
                    t = t.flatten_dims(dim, dim + len(entry) - 1)
                dim += 1
            else:
                dim += 1
        return t

    def view(self, dtype: Any) -> "NKITensor":
        """The same memory read as another dtype; the last dimension scales by the ratio of element sizes."""
        new = dtypes.as_dtype(dtype)
        if self.index is not None and self._dyn is None:
            fail("err_invalid_view", "view a tensor as another dtype before indexing it with arange/mgrid")
        if self.par_axis:  # a tensor with block dimensions (legacy): a numpy view keeps them
            return NKITensor(self.storage, self.arr.view(new), None, self.par_axis)
        layout = self._layout("view")
        old = self.dtype
        if new.itemsize == old.itemsize:
            return self._derive(layout, dtype=new)
        if self.is_indirect():
            fail("err_invalid_view", "view(dtype) to a dtype of another size is not supported after a dynamic "
                                     "select or vector_select")
        if layout.strides[-1] != 1 and layout.shape[-1] != 1:
            fail("err_invalid_view", f"view({dtypes.name(new)}): the last dimension must be contiguous in memory "
                                     f"(pattern {layout.pattern()})")
        if new.itemsize > old.itemsize:
            r = new.itemsize // old.itemsize
            if layout.shape[-1] % r or layout.offset % r or any(s % r for s in layout.strides[:-1]):
                fail("err_invalid_view", f"view({dtypes.name(new)}) of a {dtypes.name(old)} view with pattern "
                                         f"{layout.pattern()} at offset {layout.offset}: sizes, strides and offset "
                                         f"must be divisible by {r}")
            moved = Layout(layout.offset // r, layout.shape[:-1] + (layout.shape[-1] // r,),
                           tuple(s // r for s in layout.strides[:-1]) + (1,))
        else:
            r = old.itemsize // new.itemsize
            moved = Layout(layout.offset * r, layout.shape[:-1] + (layout.shape[-1] * r,),
                           tuple(s * r for s in layout.strides[:-1]) + (1,))
        return self._derive(moved, dtype=new)

    reinterpret_cast = view

    def ap(self, pattern: Sequence[Sequence[int]], offset: Optional[int] = None, scalar_offset: Any = None,
           vector_offset: Optional["NKITensor"] = None, indirect_dim: int = 0, dtype: Any = None) -> "NKITensor":
        """An explicit access pattern ``[[step, num], ...]`` over the tensor's allocation, starting at this
        view's offset plus ``offset`` (AWS's NkiTensor.ap; docs/nki.md, "Access patterns")."""
        counts, steps = _ap.parse_pattern(pattern)
        if self.index is not None and self._dyn is None:
            fail("err_invalid_access_pattern", ".ap() of a tensor indexed with arange/mgrid; call it on the "
                                               "tensor itself")
        if offset is not None and not _ap.is_int(offset):
            fail("err_invalid_access_pattern", f".ap(offset={offset!r}): offset is a compile-time integer; pass a "
                                               f"runtime offset as scalar_offset= or vector_offset=")
        if scalar_offset is not None and vector_offset is not None:
            fail("err_invalid_access_pattern", ".ap(): scalar_offset and vector_offset are mutually exclusive")
        base = self._layout("ap")
        old = self.dtype
        new = old if dtype is None else dtypes.as_dtype(dtype)
        start = base.offset
        if new.itemsize != old.itemsize:
            if (start * old.itemsize) % new.itemsize:
                fail("err_invalid_access_pattern", f".ap(dtype={dtypes.name(new)}): the view's offset {start} "
                                                   f"is not a whole number of {dtypes.name(new)} elements")
            start = start * old.itemsize // new.itemsize
        layout = Layout(start + int(offset or 0), counts, steps)
        what = f".ap(pattern={layout.pattern()}, offset={offset})"
        if self.buffer.on_chip and counts[0] > 1:
            # Elements of one partition, in the pattern's dtype (after any block dimensions of the storage).
            f = math.prod(self.storage.array.shape[self.storage.par_axis + 1:]) * old.itemsize // new.itemsize
            if steps[0] != f:
                fail("err_invalid_access_pattern",
                     f"{what}: the first pair of an on-chip tensor's pattern walks its partitions, so its step must "
                     f"be the {f} elements of a partition (partitions are read contiguously), got {steps[0]}")
        indirection = None
        if scalar_offset is not None or vector_offset is not None:
            if not _ap.is_int(indirect_dim) or not 0 <= indirect_dim < self.ndim:
                fail("err_invalid_access_pattern", f"{what}: indirect_dim={indirect_dim!r} is not a dimension of "
                                                   f"the tensor's shape {self._shape}")
            scale = int(np.prod(self._shape[indirect_dim + 1:])) * old.itemsize
            if scale % new.itemsize:
                fail("err_invalid_access_pattern", f"{what}: a step of dimension {indirect_dim} is not a whole "
                                                   f"number of {dtypes.name(new)} elements")
            scale //= new.itemsize
            if scalar_offset is not None:
                _scalar_offset_source(scalar_offset, ".ap(scalar_offset=...)")
                indirection = Indirection("scalar", scalar_offset, scale, ".ap(scalar_offset=...)")
            else:
                if not self.buffer.is_hbm:
                    fail("err_unsupported_memory", f"{what}: vector_offset indexes an HBM tensor; this one is in "
                                                   f"{self.buffer.name}")
                if indirect_dim != 0:
                    fail("err_invalid_access_pattern", f"{what}: vector_offset supports indirect_dim=0 only, got "
                                                       f"{indirect_dim}")
                rows = _vector_offset_source(vector_offset, ".ap(vector_offset=...)")
                if rows != counts[0]:
                    fail("err_shape_mismatch", f"{what}: vector_offset has {rows} rows but the pattern's first "
                                               f"pair counts {counts[0]}")
                indirection = Indirection("vector", vector_offset, scale, ".ap(vector_offset=...)")
        return self._derive(layout, dtype=new, indirection=indirection, replace=True)

    def indirect(self, index: "NKITensor", num_elem: Optional[int] = None) -> "NKITensor":
        """Tensor Indirection (NeuronCore-v4+): the (P, num_elem) view whose column i is free element
        offset(i) of each partition, the offsets read from ``index`` (uint16, (P, K), SBUF) in the consuming
        engine's snake when an instruction accesses the view (nki/indirection.py). A gather as an input, a
        scatter as a destination, of the instructions AWS documents it for."""
        layout = self._layout("indirect")
        if not self.buffer.on_chip:
            fail("err_unsupported_memory", f".indirect(index) gathers or scatters an SBUF or PSUM tile, this one is "
                                           f"in '{self.buffer.name}'")
        self._not_indirect("indirect")
        target = runtime.current().target
        if target.generation < 4:
            fail("err_unsupported_instruction", f".indirect(index): Tensor Indirection needs NeuronCore-v4 or "
                                                f"later; the target is {target.name} (NeuronCore-v{target.generation})")
        if self.ndim < 2:
            fail("err_invalid_view", f".indirect(index) of a tensor of shape {self._shape}: it needs a partition and "
                                     f"a free dimension")
        n = _ti.check_index(index, self._shape[0], num_elem)
        return self._derive(Layout(layout.offset, (self._shape[0], n), (layout.strides[0], 1)),
                            indirection=Indirection("tensor", _ti.TensorIndirection(layout, index, n), 1,
                                                    ".indirect(index)"))

    # -- helpers of the views --
    def _layout(self, api: str) -> Layout:
        if self._dyn is not None:
            if self._dyn[1] is not None and self._dyn[1].kind == "tensor":
                fail("err_invalid_view", f"{api}: a Tensor Indirection view (.indirect) is used as it is, by an "
                                         f"instruction; apply views to the tile before .indirect")
            return self._dyn[0]
        if self.index is not None:
            fail("err_invalid_view", f"{api}: a tensor indexed with arange/mgrid (advanced indexing) has no access "
                                     f"pattern; apply views before indexing")
        if self.storage.blocks is not None and self.par_axis:
            raise NKIUnsupportedError(f"{api} of a directly allocated tensor with block dimensions: index its "
                                      f"block (t[b]) first")
        return _ap.layout_of(self.storage.array, self.buffer.on_chip, self.arr)

    def _derive(self, layout: Layout, dtype: Any = None, indirection: Optional[Indirection] = None,
                replace: bool = False) -> "NKITensor":
        """A view of the same allocation through ``layout``; it keeps this view's dynamic offset unless
        ``replace`` (``.ap`` addresses the allocation afresh)."""
        dtype = np.dtype(dtype) if dtype is not None else self.dtype
        if indirection is None and not replace and self._dyn is not None:
            indirection = self._dyn[1]
        on_chip = self.buffer.on_chip
        if indirection is None and _ap.in_bounds(layout, _ap.elements_of(self.storage.array, on_chip, dtype)):
            arr, index = _ap.realize(self.storage.array, on_chip, dtype, layout)
            t = NKITensor(self.storage, arr, index, 0)
            if index is not None:  # positions in a strided argument: the layout stays the view's description
                t._dyn = (layout, None, dtype)
            return t
        # A dynamic view, or a static one reaching outside the allocation: AWS checks bounds where an
        # instruction accesses a view (a kernel may build one it then leaves unused), so its elements are
        # found, and checked, on each access (_refresh).
        placeholder = dtypes.as_strided(np.zeros(1, dtype=dtype), shape=layout.shape,
                                        strides=(0,) * len(layout.shape), writeable=False)
        t = NKITensor(self.storage, placeholder, None, 0)
        t._dyn = (layout, indirection, dtype)
        return t

    def _dim(self, dim: Any, api: str) -> int:
        if not _ap.is_int(dim) or not 0 <= int(dim) < self.ndim:
            fail("err_invalid_view", f"{api}: dim={dim!r} is not a dimension of a tensor of shape {self._shape}")
        return int(dim)

    def _vector_indirect(self) -> bool:
        return self.is_indirect() and self._dyn[1].kind == "vector"

    def _not_vector_dim(self, dim: int, api: str) -> None:
        if dim == 0 and self._vector_indirect():
            fail("err_invalid_view", f"{api}: dimension 0 of a vector-selected view is addressed indirectly and "
                                     f"cannot be sliced or selected")

    def _not_indirect(self, api: str) -> None:
        if self.is_indirect():
            fail("err_invalid_view", f"{api}: the view already has a dynamic offset; only one dynamic select per "
                                     f"tensor (check t.is_indirect())")

    def _ds_dynamic(self, key: tuple, position: int, ds: DynSlice) -> "NKITensor":
        """``t[..., nl.ds(start, n), ...]`` with ``start`` a register or a one-element tile: the static slice
        ``0:n`` moved by ``start`` steps of its dimension when an instruction accesses the view."""
        key = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis or k is None for k in key):
            raise NKIUnsupportedError("nl.ds with a dynamic start next to '...' or None: spell out the dimensions")
        dim = position
        if dim == 0 and self.buffer.on_chip:
            fail("err_invalid_view", "nl.ds with a dynamic start cannot index the partition dimension (dim 0) of "
                                     "an on-chip tensor")
        _scalar_offset_source(ds.start, "nl.ds(start, size)")
        stride = self._layout("nl.ds").strides[dim]
        static = key[:position] + (slice(0, ds.size * ds.step, ds.step),) + key[position + 1:]
        view = self[static]
        if view.index is not None:
            fail("err_invalid_view", "nl.ds with a dynamic start combines with slices and integers only")
        return view._derive(view._layout("nl.ds"),
                            indirection=Indirection("scalar", ds.start, stride, "nl.ds(start, size)"))

    def _index_dynamic(self, key: Any) -> "NKITensor":
        """``t[...]`` of a view with a dynamic offset: integers select, slices slice (static bounds)."""
        if not isinstance(key, tuple):
            key = (key,)
        if any(k is Ellipsis for k in key):
            i = key.index(Ellipsis)
            key = key[:i] + (slice(None),) * (self.ndim - len(key) + 1) + key[i + 1:]
        t, dim = self, 0
        for k in key:
            if isinstance(k, DynSlice):
                k = k.as_slice()
            if isinstance(k, slice):
                start, stop, step = k.indices(t._shape[dim])
                if (start, stop, step) != (0, t._shape[dim], 1):
                    t = t.slice(dim, start, stop, step)
                dim += 1
            elif _ap.is_int(k):
                t = t.select(dim, int(k) + (t._shape[dim] if int(k) < 0 else 0))
            else:
                fail("err_invalid_view", f"a view with a dynamic offset is indexed with integers and slices, got "
                                         f"{k!r}")
        return t

    # The operators (a + b, t[...] = v, t += x, ...), broadcast_to, astype and expand_dims are engine
    # instructions: the engines package installs them (engines/operators.py), so this module needs no engine.
    __hash__ = object.__hash__
    __array_ufunc__ = None  # `index_expr + tile` falls back to the tile's reflected operator


def _current_dialect() -> Optional[str]:
    launch = runtime.current_or_none()
    return None if launch is None else launch.dialect


def _dynamic_ds(key: Any) -> Optional[tuple]:
    """(position, nl.ds) of the one ``nl.ds`` in ``key`` whose start is a register or a tile, if any."""
    items = key if isinstance(key, tuple) else (key,)
    found = [(i, k) for i, k in enumerate(items)
             if isinstance(k, DynSlice) and (hasattr(k.start, "read_register") or isinstance(k.start, NKITensor))]
    if len(found) > 1:
        fail("err_invalid_view", "only one nl.ds with a dynamic start per access")
    return found[0] if found else None


def _scalar_offset_source(src: Any, api: str) -> None:
    """A dynamic scalar offset: a register, or a one-element integer tile on chip."""
    if hasattr(src, "read_register"):
        return
    if not isinstance(src, NKITensor):
        fail("err_invalid_access_pattern", f"{api}: a dynamic offset is a (1, 1) integer tile in SBUF or a "
                                           f"register (nisa.register_alloc), got {type(src).__name__}")
    if src.buffer.is_hbm:
        fail("err_unsupported_memory", f"{api}: a dynamic offset must be in SBUF, not HBM; copy it first "
                                       f"(nisa.dma_copy)")
    if src.size != 1:
        fail("err_shape_mismatch", f"{api}: a scalar offset has one element, got a tile of shape {src.shape}")
    if not np.issubdtype(src.dtype, np.integer):
        fail("err_unsupported_dtype", f"{api}: a dynamic offset holds integers, got {dtypes.name(src.dtype)}")


def _vector_offset_source(src: Any, api: str) -> int:
    """A vector offset: a (P, 1) integer tile on chip, one row index per partition. Returns P."""
    if not isinstance(src, NKITensor):
        fail("err_invalid_access_pattern", f"{api}: vector offsets are a (P, 1) integer tile in SBUF, got "
                                           f"{type(src).__name__}")
    if src.buffer.is_hbm:
        fail("err_unsupported_memory", f"{api}: vector offsets must be in SBUF, not HBM")
    if src.ndim < 1 or int(np.prod(src.shape[1:])) != 1:
        fail("err_shape_mismatch", f"{api}: vector offsets have shape (P, 1), got {src.shape}")
    if not np.issubdtype(src.dtype, np.integer):
        fail("err_unsupported_dtype", f"{api}: vector offsets hold integers, got {dtypes.name(src.dtype)}")
    return int(src.shape[0])


def _fit(values: Any, shape: tuple) -> Any:
    """``values`` as written into ``shape``: broadcast when numpy can, else reshaped when the element counts
    agree (tiles are >= 2-D where HBM vectors are 1-D); anything else is a shape error, not numpy's."""
    vshape = np.shape(values)
    if vshape == shape:
        return values
    try:
        if np.broadcast_shapes(vshape, shape) == tuple(shape):
            return values
    except ValueError:
        pass
    if int(np.prod(vshape)) == int(np.prod(shape)):
        return np.reshape(values, shape)
    fail("err_shape_mismatch", f"a value of shape {tuple(vshape)} cannot be written into a tensor of shape {shape}")


def _normalize_key(key: Any, ndim: int) -> tuple:
    if not isinstance(key, tuple):
        key = (key,)
    out: list = []
    for k in key:
        if k is Ellipsis:
            n = ndim - (len(key) - 1)
            out.extend([slice(None)] * max(n, 0))
        elif isinstance(k, DynSlice):
            out.append(k.as_slice())
        elif isinstance(k, NKITensor):
            out.append(_dynamic_index(k))
        elif isinstance(k, (list, tuple)):
            out.append(np.asarray(k, dtype=np.int64))
        else:
            out.append(k)
    if len(out) > ndim:
        fail("err_exceed_max_supported_dimension",
             f"too many indices ({len(out)}) for a tensor with {ndim} dimensions")
    return tuple(out)


def _dynamic_index(t: "NKITensor") -> IndexExpr:
    """A tile's values as an index (indirect DMA, dynamic offsets): a (P, 1) tile indexes the partitions it
    stands on, a (1, 1) tile is one offset. Bounds are checked where the access happens."""
    if t.buffer.is_hbm:
        fail("err_unsupported_memory",
             "dynamic indices have to be in SBUF (or PSUM): load the index tensor first, e.g. "
             "idx_tile = nl.load(idx_tensor[i_p])")
    if dtypes.is_float(t.dtype) or t.dtype == np.bool_:
        fail("err_unsupported_dtype", f"a tile used as an index must hold integers, got {dtypes.name(t.dtype)}")
    return np.asarray(t.read(), dtype=np.int64).view(TileIndex if math.prod(t.shape) > 1 else IndexExpr)


def _mask_to(mask: np.ndarray, shape: tuple) -> np.ndarray:
    """The mask as seen by an access of ``shape``: broadcast, or reduced where the access is narrower."""
    try:
        return np.broadcast_to(mask, shape)
    except ValueError:
        pass
    full = np.broadcast_shapes(mask.shape, shape) if len(mask.shape) <= len(shape) else None
    if full is None:
        m = mask.reshape(mask.shape[:len(shape)] + (-1,)).any(axis=-1) if mask.ndim > len(shape) else mask
        return np.broadcast_to(m, shape)
    m = np.broadcast_to(mask, full)
    axes = tuple(i for i, (f, s) in enumerate(zip(full, shape)) if s == 1 and f != 1)
    return np.broadcast_to(m.any(axis=axes, keepdims=True), shape)


def _schedule_access(storage: Any, arr: np.ndarray, writing: bool) -> None:
    """An operand of the instruction being simulated, for its launch's schedule (nki/schedule.py); shared HBM
    that other cores of the launch run beside this one can touch waits for its turn (cores.CoreGroup.sync)."""
    launch = runtime.current_or_none()
    if launch is None:
        return
    buffer = storage.buffer
    if writing and buffer is sbuf:
        launch.sbuf_epoch += 1
    elif buffer is psum:
        products = launch.products
        if products is not None and products.pending and not products.own_access:
            products.drain()  # a product still queued may write what this instruction reads or writes
    elif launch.cores is not None and buffer is shared_hbm:
        # A read is for the instruction counted next (its values are consumed after the count).
        launch.cores.sync(launch._thread, launch.costs.clock + (not writing))
    launch.costs.scheduler.access(storage, arr, writing)
