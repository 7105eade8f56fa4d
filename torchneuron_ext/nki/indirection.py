"""Tensor Indirection (NeuronCore-v4): ``t.indirect(index, num_elem)``, a gather or scatter of columns of an
on-chip tile, with the offsets read from an SBUF tile when an instruction runs.

AWS's reference (``NkiTensor.indirect``; the Trainium3 architecture page's SBUF/PSUM indirect access) and its
tensor indirection tutorial define the view: of an on-chip tile ``t`` of P partitions, ``t.indirect(index,
num_elem)`` is a (P, num_elem) view whose column ``i`` is the free-dimension element ``offset(i)`` of every
partition. The offsets are stored as a snake within each group of G partitions (G = 16 for the Vector, Scalar
and GpSimd engines, 32 for the Tensor engine): in the group starting at partition ``start``, column ``i`` uses
``index[start + i % G, i // G]``. So each group reads its own offsets from its own partitions (AWS's tutorial
replicates one 16-partition offset tile over all groups for a gather shared by every partition), and one
group holds at most G * K offsets for an index of K columns.

Because G is the consuming engine's, the offsets are resolved when an instruction reads or writes the view,
inside ``engine_group(G)``, which only the instructions that accept tensor indirection open
(nki/isa/indirect.py); any other access refuses the view.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional

import numpy as np

from . import dtypes
from .access_pattern import Layout
from .errors import fail

__all__ = ["TensorIndirection", "engine_group", "current_group", "INDEX_DTYPE", "ENGINE_GROUP", "TENSOR_GROUP"]

# The offsets are uint16: AWS's tutorial builds a uint16 index tile, and its validator refuses a uint32 one.
INDEX_DTYPE = np.dtype(np.uint16)
ENGINE_GROUP = 16   # Vector, Scalar, GpSimd engines
TENSOR_GROUP = 32   # Tensor engine

_state = threading.local()  # each core of an LNC=2 launch is a thread running its own instructions


@contextmanager
def engine_group(group: int) -> Iterator[None]:
    """While an instruction that accepts tensor indirection runs: its engine's offset group size."""
    previous = getattr(_state, "group", None)
    _state.group = group
    try:
        yield
    finally:
        _state.group = previous


def current_group() -> Optional[int]:
    return getattr(_state, "group", None)


class TensorIndirection:
    """The ``source`` of an ``access_pattern.Indirection`` of kind "tensor": the base view's layout
    (partitions first), the index tile and the number of offsets used."""
    __slots__ = ("base", "index", "num_elem")

    def __init__(self, base: Layout, index: Any, num_elem: int) -> None:
        self.base, self.index, self.num_elem = base, index, num_elem

    def flat_elements(self) -> np.ndarray:
        """The allocation's element numbers the (P, num_elem) view addresses now, with the offsets the
        current engine's group reads; offsets outside the base view's free elements are errors."""
        group = current_group()
        if group is None:
            fail("err_unsupported_tensor_indirection",
                 "a Tensor Indirection view (t.indirect(index)) is accessed by an instruction or operand that does "
                 "not support tensor indirection")
        base, p, n = self.base, self.base.shape[0], self.num_elem
        offsets = np.asarray(self.index.read(), dtype=np.int64).reshape(p, -1)
        k = offsets.shape[1]
        if n > group * k:
            fail("err_tensor_access_out_of_bound",
                 f".indirect(index, num_elem={n}): a group of {group} partitions holds {group} x {k} = {group * k} "
                 f"offsets in an index of {k} columns (offset i is index[start + i % {group}, i // {group}])")
        if p % group and n > p % group:
            # The last, partial group reads index rows past the tile.
            fail("err_tensor_access_out_of_bound",
                 f".indirect(index, num_elem={n}): the last group of {group} partitions of a {p}-partition view has "
                 f"only {p % group} index rows, but offset i is read from row start + i % {group}")
        rows = (np.arange(p)[:, None] // group) * group + np.arange(n)[None, :] % group
        cols = np.broadcast_to(np.arange(n)[None, :] // group, (p, n))
        chosen = offsets[rows, cols]
        free_shape = base.shape[1:]
        free = int(np.prod(free_shape))
        if chosen.size and (chosen.min() < 0 or chosen.max() >= free):
            fail("err_tensor_access_out_of_bound",
                 f".indirect(index): offsets range over [{int(chosen.min())}, {int(chosen.max())}] but the tile has "
                 f"{free} elements per partition")
        within = np.zeros_like(chosen)
        rest = chosen
        for size, stride in zip(reversed(free_shape), reversed(base.strides[1:])):
            rest, digit = np.divmod(rest, size)
            within = within + digit * stride
        return base.offset + np.arange(p, dtype=np.int64)[:, None] * base.strides[0] + within


def check_index(index: Any, partitions: int, num_elem: Optional[int], api: str = ".indirect") -> int:
    """The index tile's documented form (SBUF, uint16, (P, K) with P the view's partitions); the number of
    offsets the view uses (num_elem, default index.size)."""
    if not hasattr(index, "buffer") or not hasattr(index, "read"):
        fail("err_invalid_argument", f"{api}(index): the offsets are an SBUF tile, got {type(index).__name__}")
    if index.buffer.name != "sbuf":
        fail("err_unsupported_memory", f"{api}(index): the offsets must be in SBUF, got a tile in "
                                       f"'{index.buffer.name}'")
    if np.dtype(index.dtype) != INDEX_DTYPE:
        fail("err_unsupported_dtype", f"{api}(index): the offsets are uint16, got {dtypes.name(index.dtype)}")
    if len(index.shape) != 2 or index.shape[0] != partitions:
        fail("err_shape_mismatch", f"{api}(index): the offsets have the shape (P, K) with P = {partitions}, the "
                                   f"view's partitions; got {tuple(index.shape)}")
    size = int(np.prod(index.shape))
    if num_elem is None:
        return size
    if isinstance(num_elem, bool) or not isinstance(num_elem, (int, np.integer)) or not 1 <= int(num_elem) <= size:
        fail("err_invalid_argument", f"{api}(index, num_elem={num_elem!r}): num_elem is an integer in [1, "
                                     f"index.size = {size}]")
    return int(num_elem)
