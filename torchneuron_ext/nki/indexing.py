"""Index expressions of the legacy dialect: nl.arange, nl.mgrid, nl.ds, and masks built from them.

An index expression is a numpy integer array (a subclass, so affine arithmetic such as
``i * 128 + ix`` keeps it one) whose shape says which tile axis it walks: ``[:, None]`` is the
partition axis, ``[None, :]`` a free axis. Comparisons give boolean arrays of the same kind: masks.
"""
from __future__ import annotations

import operator
from typing import Any, Iterator, Optional

import numpy as np

from .rules import frontend as _frontend
from .rules import masks as _masks


class IndexExpr(np.ndarray):
    """An integer index array produced by ``nl.arange``/``nl.mgrid`` and affine arithmetic on it."""

    def __array_finalize__(self, obj: Any) -> None:  # numpy keeps the subclass through arithmetic
        pass

    def __bool__(self) -> bool:
        _frontend.index_truth_value()  # raises err_control_flow_condition_depending_on_arange
        return False

    def __setitem__(self, key: Any, value: Any) -> None:
        _frontend.index_item_assignment()  # a kernel may not (err_cannot_assign_to_index)
        super().__setitem__(key, value)


class TileIndex(IndexExpr):
    """Indices read from a tile of more than one element: indirect access (gather/scatter). A (1, 1) tile
    is a dynamic offset and stays an IndexExpr. Arithmetic with index expressions keeps the kind."""
    __array_priority__ = 1.0


def arange(*args: int) -> IndexExpr:
    """``nl.arange(stop)`` / ``nl.arange(start, stop)``: lift it with ``[:, None]`` or ``[None, :]``."""
    if len(args) not in (1, 2):
        raise TypeError("nl.arange takes (stop) or (start, stop)")
    return np.arange(*args, dtype=np.int64).view(IndexExpr)


class DynSlice:
    """``nl.ds(start, size)``: the slice ``start:start+size`` with a size known at trace time."""
    __slots__ = ("start", "size", "step")

    def __init__(self, start: Any, size: int, step: int = 1) -> None:
        self.start, self.size, self.step = start, size, step

    def as_slice(self) -> slice:
        start = int(self.start)
        return slice(start, start + self.size * self.step, self.step)

    def __repr__(self) -> str:
        return f"nl.ds({self.start}, {self.size})"


def ds(start: Any, size: int, step: int = 1) -> DynSlice:
    return DynSlice(start, size, step)


class _Grid(tuple):
    """What ``nl.mgrid[...]`` returns: unpacks to index expressions; also ``.p``, ``.x``, ``.y``, ``.z``
    (the IndexExpr of axis 0 to 3)."""

    p = property(operator.itemgetter(0))
    x = property(operator.itemgetter(1))
    y = property(operator.itemgetter(2))
    z = property(operator.itemgetter(3))


class _MGrid:
    def __getitem__(self, key: Any) -> _Grid:
        if not isinstance(key, tuple):
            key = (key,)
        n = len(key)
        out = []
        for axis, s in enumerate(key):
            if not isinstance(s, slice) or s.stop is None:
                raise TypeError("nl.mgrid takes slices with explicit bounds, e.g. nl.mgrid[0:128, 0:512]")
            a = np.arange(s.start or 0, s.stop, s.step or 1, dtype=np.int64)
            shape = [1] * n
            shape[axis] = a.size
            out.append(a.reshape(shape).view(IndexExpr))
        return _Grid(out)

    def __repr__(self) -> str:
        return "nl.mgrid"


mgrid = _MGrid()


def as_mask(mask: Any) -> Optional[np.ndarray]:
    """A mask as a boolean array (None when the op is unmasked or the mask is constantly true)."""
    if mask is None:
        return None
    if isinstance(mask, (bool, np.bool_)):
        return None if mask else np.zeros((1, 1), dtype=bool)
    if hasattr(mask, "storage"):
        _masks.tile_mask(mask)  # a tile is a runtime value (err_unsupported_expression_in_mask)
    arr = np.asarray(mask)
    if arr.dtype != np.bool_:
        raise TypeError(f"mask= must be a comparison of index expressions, got an array of {arr.dtype}")
    if arr.all():
        return None
    return arr


def iter_grid(grid: tuple) -> Iterator[tuple]:
    """Program ids of a launch grid in row-major order (instances run one after another)."""
    return iter(np.ndindex(*grid)) if grid else iter([()])
