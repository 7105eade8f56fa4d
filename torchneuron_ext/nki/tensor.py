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

from . import dtypes
from .errors import NKIUnsupportedError, fail
from .indexing import DynSlice, IndexExpr, TileIndex
from .memory import Buffer
from .rules import dependencies as _deps


class NKITensor:
    """A tensor or tile inside a kernel. Partition dimension first for tiles in SBUF and PSUM."""

    __slots__ = ("storage", "arr", "index", "par_axis", "_shape", "_slices", "_updated", "_reduce_into", "_valid")

    def __init__(self, storage: Any, arr: np.ndarray, index: Optional[tuple] = None, par_axis: int = 0) -> None:
        self.storage, self.arr, self.index, self.par_axis = storage, arr, index, par_axis
        self._slices = None
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
        raise TypeError("an NKI tile has no truth value inside a kernel; compare it with nl.* ops instead")

    # -- indexing ------------------------------------------------------------
    def __getitem__(self, key: Any) -> "NKITensor":
        key = _normalize_key(key, self.ndim)
        if self.storage.blocks is not None and self.index is None:
            return self._block(key)
        if self.index is not None:
            return self._compose(key)
        has_adv = any(isinstance(k, np.ndarray) for k in key)
        if has_adv:
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
        # Basic indexing: check bounds (numpy would clip slices silently) and take a view.
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
        Unmasked out-of-bounds positions raise, or with ``skip`` (DMA's oob_mode=skip) are left out."""
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

    def read(self, mask: Optional[np.ndarray] = None) -> np.ndarray:
        """The values (a view when possible: do not write into it)."""
        if _deps.active:
            _deps.note_access(self, False)
        if self.storage.live is not None:
            self._touch()
        if self.index is None:
            return self.arr
        slices = self._fast_slices()
        if slices is not None:
            return self.arr[slices]
        return self.arr[self._checked_index(mask)[0]]

    def read_valid(self, mask: Optional[np.ndarray] = None, skip: bool = False) -> "tuple[np.ndarray, Any]":
        """The values and which of them were read (None: all): out-of-bounds positions are skipped, not
        errors, with ``skip``."""
        if self.index is None or self._fast_slices() is not None:
            return self.read(mask), None
        self._touch()
        idx, valid = self._checked_index(mask, skip)
        return self.arr[idx], valid

    def write(self, values: Any, mask: Optional[np.ndarray] = None, skip: bool = False,
              rmw: Optional[Callable] = None) -> None:
        """Store ``values`` (already in this tensor's dtype, broadcastable to its shape, or of its element
        count: a (128, 1) tile stored into a (128,) HBM vector). ``rmw``: a binary numpy function; the memory
        becomes ``rmw(memory, values)`` (computed in fp32), each occurrence of a repeated index in turn, as
        the DMA engine's read-modify-write does."""
        self.storage.written = True
        if _deps.active:
            _deps.note_access(self, True, mask)
        if self.storage.live is not None:
            self._touch(reading=False)
        if self.storage.psum_defined is not None:
            self._mark_defined(mask)
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

    # -- views ---------------------------------------------------------------
    def reshape(self, shape: Sequence[int]) -> "NKITensor":
        shape = tuple(int(s) for s in shape)
        if int(np.prod(shape)) != int(np.prod(self._shape)):
            fail("err_invalid_reshape", f"cannot reshape a tensor of shape {self._shape} to {shape}")
        if self.index is not None or not self.arr.flags.c_contiguous:
            fail("err_invalid_reshape", "only a contiguous tensor (no advanced indexing) can be reshaped")
        return NKITensor(self.storage, self.arr.reshape(shape), None, 0)

    def view(self, dtype: Any) -> "NKITensor":
        """The same memory read as another dtype (``t.view(nl.int32)``)."""
        if self.index is not None:
            fail("err_invalid_view", "view a tensor as another dtype before indexing it with arange/mgrid")
        return NKITensor(self.storage, self.arr.view(dtypes.as_dtype(dtype)), None, self.par_axis)

    def permute(self, *dims: Any) -> "NKITensor":
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        if self.index is not None:
            fail("err_invalid_view", "permute a tensor before indexing it with arange/mgrid")
        return NKITensor(self.storage, self.arr.transpose(dims), None, 0)

    def ap(self, pattern: Sequence[Sequence[int]], offset: int = 0, scalar_offset: Any = None,
           vector_offset: Any = None, indirect_dim: Any = None) -> "NKITensor":
        """An access pattern ``[[step, num], ...]`` over this tensor's memory, starting at ``offset``.
        Dynamic offsets (``scalar_offset``, ``vector_offset``/``indirect_dim``) are not modelled."""
        if scalar_offset is not None or vector_offset is not None:
            raise NKIUnsupportedError(".ap(scalar_offset=..., vector_offset=...) (dynamic access patterns) is not "
                                      "modelled by the simulator; index with a tile instead (t[idx_tile, ...])")
        if self.index is not None or not self.arr.flags.c_contiguous:
            fail("err_invalid_access_pattern", ".ap() needs a contiguous tensor")
        flat = self.arr.reshape(-1)
        shape = tuple(int(num) for _, num in pattern)
        strides = tuple(int(step) * flat.itemsize for step, _ in pattern)
        last = offset + sum((n - 1) * s for s, n in ((int(p[0]), int(p[1])) for p in pattern))
        if offset < 0 or last >= flat.size:
            fail("err_tensor_access_out_of_bound",
                 f"access pattern {list(map(list, pattern))} at offset {offset} reaches element {last} of a "
                 f"tensor with {flat.size} elements")
        view = np.lib.stride_tricks.as_strided(flat[offset:], shape=shape, strides=strides)
        return NKITensor(self.storage, view, None, 0)

    # The operators (a + b, t[...] = v, t += x, ...), broadcast_to, astype and expand_dims are engine
    # instructions: the engines package installs them (engines/operators.py), so this module needs no engine.
    __hash__ = object.__hash__
    __array_ufunc__ = None  # `index_expr + tile` falls back to the tile's reflected operator


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
