"""The legacy front end's rule that the iterations of ``nl.affine_range`` are independent.

The NKI 0.1 compiler (``neuronxcc.nki``) may run the iterations of an ``affine_range`` loop in any order or
in parallel, so an iteration must not write a location another iteration wrote, nor read what an earlier
iteration wrote (``err_unexpected_output_dependencies``). Associative reductions are not dependencies in
this sense (AWS's matmul tutorial): ``t += x`` and ``nl.loop_reduce`` into one tile, and matmul
accumulation into PSUM. ``sequential_range`` allows every dependency. NKI 0.2 made ``affine_range`` an alias
of ``range`` (fully unrolled), so the rule belongs to the legacy dialect only.

How it is judged: while an affine loop of a legacy launch runs, every tensor access (NKITensor.read and
.write call ``note_access``) stamps, per element of the tensor's allocation, the iteration that wrote it.
An access to an element an earlier iteration of an enclosing affine loop wrote is the error. Stamps live
as long as the loop, keyed weakly by allocation, so a tile that an iteration creates is new to the loop
(even if Python reuses the address of an earlier one). A masked write stamps only the positions its mask
selects; an access through index arrays (tile-valued indices) the elements they name. PSUM is judged like
SBUF: its accumulation across iterations is ``+=`` (a reduction). Stamps are 16-bit, 32-bit for loops of
more than 65535 iterations. Not judged: directly allocated tiles (AWS's rule is about logical tiles; a
modulo allocation puts the tiles of many iterations in one physical tile by design, and the simulator sees
only the physical one), and accesses through a bit-cast view (other element size).
"""
from __future__ import annotations

import sys
import threading
import weakref
from typing import Any, Callable, Iterable, Iterator, Optional

import numpy as np

from ..data_address import data_address
from ..errors import _kernel_location, fail

__all__ = ["AffineRange", "affine_range", "grid_instances", "note_access", "reduction_target", "watch", "unwatch"]

_MAX_ITERATIONS = 0xFFFF

_local = threading.local()
# How many tracked loops run on any thread: the one check NKITensor.read/write pay when none does.
active = 0
_count_lock = threading.Lock()


class _Loop:
    """One execution of an affine loop: its current iteration and the stamps of what it wrote (16-bit, or
    32-bit for a loop of more iterations)."""
    __slots__ = ("iteration", "stamps", "where", "unit", "stamp_dtype")

    def __init__(self, where: str, unit: str, iterations: int = 0) -> None:
        self.iteration, self.unit = 0, unit
        self.stamp_dtype = np.uint16 if iterations <= _MAX_ITERATIONS else np.uint32
        self.stamps: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()  # ndarray or _Pending
        self.where = where


def _stack() -> list:
    stack = getattr(_local, "loops", None)
    if stack is None:
        stack = _local.loops = []
    return stack


class AffineRange:
    """What ``nl.affine_range`` returns in the legacy dialect: a range whose iteration is tracked."""
    __slots__ = ("range", "where")

    def __init__(self, rng: range, where: str) -> None:
        self.range, self.where = rng, where

    def __len__(self) -> int:
        return len(self.range)

    def __getitem__(self, key: Any) -> Any:
        return self.range[key]

    def __contains__(self, value: Any) -> bool:
        return value in self.range

    def __repr__(self) -> str:
        return f"affine_range({self.range.start}, {self.range.stop}, {self.range.step})"

    def __iter__(self) -> Iterator[int]:
        return _tracked(self.range, f"the nl.affine_range loop at {self.where}", "iteration", len(self.range))


def _tracked(values: Iterable[Any], where: str, unit: str, iterations: int) -> Iterator[Any]:
    global active
    loop = _Loop(where, unit, iterations)
    stack = _stack()
    stack.append(loop)
    with _count_lock:
        active += 1
    try:
        for n, value in enumerate(values):
            loop.iteration = n + 1  # 0 in the stamps: never written
            yield value
    finally:
        with _count_lock:
            active -= 1
        stack.remove(loop)


def grid_instances(program_ids: Iterable[tuple], size: int, dialect: Optional[str]) -> Iterable[tuple]:
    """The instances of a legacy SPMD grid are independent like affine iterations (AWS's error page: they
    may run in parallel, so each writes its own part of the outputs)."""
    if dialect != "legacy" or size < 2:
        return program_ids
    return _tracked(program_ids, "the launch grid", "instance", size)


def affine_range(rng: range, dialect: Optional[str]) -> Any:
    """The iterable ``nl.affine_range`` gives: tracked in a legacy launch, the plain range otherwise."""
    if dialect != "legacy":
        return rng
    return AffineRange(rng, _caller_line())


def _caller_line() -> str:
    loc = _kernel_location(sys._getframe(2))
    return f"line {loc[1]}" if loc is not None else "the kernel"


def reduction_target(ref: Any) -> None:
    """The instruction about to run is an associative reduction into ``ref`` (``t += x``, ``loop_reduce``):
    its read and write of ``ref`` are not dependencies."""
    if active:
        _local.reducing = ref.storage


def _element_view(stamps: np.ndarray, base: np.ndarray, arr: np.ndarray) -> Optional[np.ndarray]:
    """The stamps of the elements ``arr`` (a view of ``base``) covers, as a strided view of ``stamps``."""
    item = base.itemsize
    if arr.itemsize != item or arr.dtype != base.dtype:
        return None
    offset = data_address(arr) - data_address(base)
    if offset % item or any(s % item for s in arr.strides):
        return None
    first = offset // item
    if first < 0 or first >= stamps.size and arr.size:
        return None
    sitem = stamps.itemsize
    return np.lib.stride_tricks.as_strided(stamps[first:], shape=arr.shape,
                                           strides=tuple(s // item * sitem for s in arr.strides))


def _exempt(storage: Any) -> bool:
    from ..runtime import current_or_none
    if storage.blocks is not None:
        return True
    launch = current_or_none()
    if launch is None:
        return True
    direct = launch._direct_tiles
    return bool(direct) and any(t is storage for t in direct.values())


def watch(storages: "dict[Any, Any]", callback: Callable[[Any, Optional[tuple]], None]) -> None:
    """Call ``callback(storage, kernel line)`` on every write to one of ``storages`` on this thread, until
    ``unwatch`` (frontend.py: writes to a legacy kernel's immutable parameters)."""
    global active
    unwatch()
    _local.watched = (set(storages), callback)
    with _count_lock:
        active += 1


def unwatch() -> None:
    global active
    if getattr(_local, "watched", None) is not None:
        _local.watched = None
        with _count_lock:
            active -= 1


def note_access(tensor: Any, writing: bool, mask: Any = None) -> None:
    """Called by NKITensor.read/.write while an affine loop runs or writes are watched: the dependency
    check, on the elements the access touches (a masked write only the positions its mask selects, an
    indirect access the elements its indices name)."""
    if writing:
        watched = getattr(_local, "watched", None)
        if watched is not None and tensor.storage in watched[0]:
            watched[1](tensor.storage, _kernel_location(sys._getframe(1)))
    stack = getattr(_local, "loops", None)
    if not stack:
        return
    storage = tensor.storage
    if getattr(_local, "reducing", None) is storage:
        if writing:
            _local.reducing = None
        return
    base = storage.array
    if not base.flags.c_contiguous or _exempt(storage):
        return
    elements = _elements(tensor, base, mask if writing else None)
    if elements is None:
        return
    for loop in stack:
        if loop.unit == "instance" and (elements.mask is not None or elements.flat is not None):
            # Grid instances are judged on plain accesses only: the compiler builds one instance, and AWS
            # ships kernels whose instances all write the same masked positions (nki-samples'
            # resize_nearest_fixed_dma_kernel, launched over the batch, loops over the whole batch).
            continue
        stamps = loop.stamps.get(storage)
        if stamps is None:
            if writing:
                # Most tensors written in an iteration are that iteration's own (they die with it): remember
                # the elements, and make stamps only when another iteration touches the tensor.
                loop.stamps[storage] = _Pending(loop.iteration, elements)
            continue
        if isinstance(stamps, _Pending):
            if stamps.iteration == loop.iteration:
                if writing:
                    stamps.accesses.append(elements)
                continue
            stamps = loop.stamps[storage] = stamps.materialize(base, loop.stamp_dtype)
        seen = elements.stamps(stamps, base)
        if seen is None:
            continue
        if seen.any():
            earlier = seen[(seen != 0) & (seen != loop.iteration)]
            if earlier.size:
                _raise(tensor, writing, loop, int(earlier.min()))
        if writing:
            elements.stamp(stamps, base, loop.iteration)


class _Elements:
    """The elements of an allocation one access touches: a strided view (``arr``), optionally narrowed by a
    boolean ``mask`` of its shape, or flat element numbers (``flat``, an indirect or irregular access)."""
    __slots__ = ("arr", "mask", "flat")

    def __init__(self, arr: Optional[np.ndarray], mask: Optional[np.ndarray], flat: Optional[np.ndarray]) -> None:
        self.arr, self.mask, self.flat = arr, mask, flat

    def stamps(self, stamps: np.ndarray, base: np.ndarray) -> Optional[np.ndarray]:
        if self.flat is not None:
            return stamps[self.flat]
        view = _element_view(stamps, base, self.arr)
        return view if view is None or self.mask is None else view[self.mask]

    def stamp(self, stamps: np.ndarray, base: np.ndarray, iteration: int) -> None:
        if self.flat is not None:
            stamps[self.flat] = iteration
            return
        view = _element_view(stamps, base, self.arr)
        if view is not None:
            if self.mask is None:
                view[...] = iteration
            else:
                view[self.mask] = iteration


def _elements(tensor: Any, base: np.ndarray, mask: Any) -> Optional[_Elements]:
    """What ``tensor``'s access touches, or None when it touches nothing or cannot be told."""
    if tensor.index is not None:
        tensor._elementwise_index()  # rows of a window: the rules judge element numbers
    arr = tensor.arr
    if tensor.index is not None:
        slices = tensor._fast_slices()
        if slices is None:
            return _indexed(tensor, base, arr, mask)
        arr = arr[slices]
    if not arr.size:
        return None
    if mask is None:
        return _Elements(arr, None, None)
    try:
        selected = np.broadcast_to(np.asarray(mask, dtype=bool), arr.shape)
    except ValueError:  # a mask narrower than the access: not judged rather than judged on all of it
        return None
    return _Elements(arr, selected, None) if selected.any() else None


def _indexed(tensor: Any, base: np.ndarray, arr: np.ndarray, mask: Any) -> Optional[_Elements]:
    """An access through index arrays (tile-valued indices, irregular aranges): the flat numbers of the
    in-bounds elements it selects, when ``arr`` is the allocation itself in another shape."""
    if arr.dtype != base.dtype or arr.size != base.size or not arr.flags.c_contiguous \
            or data_address(arr) != data_address(base):
        return None
    index = [np.asarray(a).view(np.ndarray) for a in tensor.index]
    try:
        lead = np.broadcast_shapes(*(a.shape for a in index))
        valid = np.ones(lead, dtype=bool) if mask is None else np.array(np.broadcast_to(mask, lead), dtype=bool)
    except ValueError:
        return None
    index = [np.broadcast_to(a, lead) for a in index]
    for a, dim in zip(index, arr.shape):
        valid &= (a >= 0) & (a < dim)
    if not valid.any():
        return None
    return _Elements(None, None, np.ravel_multi_index(tuple(a[valid] for a in index), arr.shape))


class _Pending:
    """The writes of one iteration to a tensor no other iteration has touched yet."""
    __slots__ = ("iteration", "accesses")

    def __init__(self, iteration: int, elements: _Elements) -> None:
        self.iteration, self.accesses = iteration, [elements]

    def materialize(self, base: np.ndarray, dtype: type) -> np.ndarray:
        stamps = np.zeros(base.size, dtype=dtype)
        for elements in self.accesses:
            elements.stamp(stamps, base, self.iteration)
        return stamps


def _raise(tensor: Any, writing: bool, loop: _Loop, iteration: int) -> None:
    name = f"'{tensor.name}'" if tensor.name else f"a {tensor.buffer.name} tensor of shape {tensor.storage.array.shape}"
    what = "writes" if writing else "reads"
    fail("err_unexpected_output_dependencies",
         f"Unexpected output dependencies: {loop.unit} {loop.iteration - 1} of {loop.where} {what} {name} where "
         f"{loop.unit} {iteration - 1} wrote it; "
         + ("the instances of an SPMD grid must write different locations (index with nl.program_id)"
            if loop.unit == "instance" else
            "affine_range iterations must be independent (index the tensor with the loop variable, accumulate "
            "with '+=', or use nl.sequential_range)"))
