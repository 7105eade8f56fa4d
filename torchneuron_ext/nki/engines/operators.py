"""The tile operators of :class:`NKITensor`: ``a + b``, ``-t``, ``t[...] = v``, ``t += x``, ``t.astype(...)``.

tensor.py defines what a tensor *is* (storage, views, access rules) and does not know the engines; the
engines package installs these methods on it when it is imported, as Triton's interpreter installs its
builder into ``tl.tensor``. Every operator is one engine instruction.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ..tensor import NKITensor

from .elementwise import accumulate, assign, broadcast_to, copy, elementwise, expand_dims

# dunder suffix -> engine op; the reflected form swaps the operands.
_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide", "pow": "power",
           "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor"}
_FORWARD_ONLY = {"mod": "mod", "lshift": "left_shift", "rshift": "right_shift", "lt": "less",
                 "le": "less_equal", "gt": "greater", "ge": "greater_equal", "eq": "equal", "ne": "not_equal"}
_UNARY = {"neg": "negative", "invert": "invert", "abs": "abs"}
_IN_PLACE = {"iadd": "add", "isub": "subtract", "imul": "multiply", "itruediv": "divide"}


def _binary(op: str, reverse: bool) -> Callable[[NKITensor, Any], NKITensor]:
    def method(self: NKITensor, other: Any) -> NKITensor:
        if other is None and op in ("equal", "not_equal"):
            # `t != None` asks whether an optional argument was given (AWS's tensors are plain objects),
            # never for an elementwise tile.
            return op == "not_equal"
        a, b = (other, self) if reverse else (self, other)
        return elementwise(op, (a, b), operator_overload=True)
    return method


def _unary(op: str) -> Callable[[NKITensor], NKITensor]:
    def method(self: NKITensor) -> NKITensor:
        return elementwise(op, (self,))
    return method


def _in_place(op: str) -> Callable[[NKITensor, Any], NKITensor]:
    def method(self: NKITensor, other: Any) -> NKITensor:
        accumulate(self, op, other)
        self._updated = True
        return self
    return method


def _setitem(self: NKITensor, key: Any, value: Any) -> None:
    dst = self[key]
    if isinstance(value, NKITensor) and value._updated:
        value._updated = False  # `t[i] += x` already updated t[i] in place
        return
    if isinstance(value, NKITensor) and value._reduce_into is not None:
        accumulate(dst, value._reduce_into, value)  # nl.loop_reduce after its first iteration
        return
    assign(dst, value)


def _broadcast_to(self: NKITensor, shape: Sequence[int]) -> NKITensor:
    return broadcast_to(self, tuple(shape))


def _astype(self: NKITensor, dtype: Any) -> NKITensor:
    return copy(self, dtype=dtype)


def _expand_dims(self: NKITensor, axis: int) -> NKITensor:
    return expand_dims(self, axis)


def install(cls: type) -> None:
    """Give ``cls`` (NKITensor) its operators and the methods that are engine instructions."""
    for name, op in _BINARY.items():
        setattr(cls, f"__{name}__", _binary(op, False))
        setattr(cls, f"__r{name}__", _binary(op, True))
    for name, op in _FORWARD_ONLY.items():
        setattr(cls, f"__{name}__", _binary(op, False))
    for name, op in _UNARY.items():
        setattr(cls, f"__{name}__", _unary(op))
    for name, op in _IN_PLACE.items():
        setattr(cls, f"__{name}__", _in_place(op))
    cls.__setitem__ = _setitem
    cls.broadcast_to = _broadcast_to
    cls.astype = _astype
    cls.expand_dims = _expand_dims
