"""``nki.language`` of the new dialect (NKI 0.2+): slicing and ``nl.ds`` only, no arange/mgrid/mask."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from .._lang import *  # noqa: F401,F403
from .._lang import (abs, all, max, min, sum, par_dim, tile, fori_loop, while_loop, dynamic_range,  # noqa: F401
                    bitwise_not)
from .._lang import _sbuf_identity_matrix as shared_identity_matrix  # noqa: F401 (SBUF in NKI 0.2+)
from .. import _lang
from ..memory import Buffer as _Buffer
from ..tensor import NKITensor

# AWS's name of the tensor class (nki.language.NkiTensor), for isinstance checks and annotations.
NkiTensor = NKITensor

# AWS's reference declares ``DType = str``: a name for annotations (``dtype: nl.DType``).
DType = str


class _MemoryRegionType(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _Buffer)

    def __iter__(cls) -> Any:
        return iter((cls.sbuf, cls.psum, cls.private_hbm, cls.shared_hbm))


class MemoryRegion(metaclass=_MemoryRegionType):
    """``nl.MemoryRegion``: AWS's enumeration of the memories, whose members are ``nl.sbuf``, ``nl.psum``,
    ``nl.private_hbm`` and ``nl.shared_hbm`` (``MemoryRegion("sbuf")`` looks one up by value)."""
    sbuf, psum, private_hbm, shared_hbm = _lang.sbuf, _lang.psum, _lang.private_hbm, _lang.shared_hbm

    def __new__(cls, value: Any) -> Any:
        for member in cls:
            if value is member or value == member.name:
                return member
        raise ValueError(f"{value!r} is not a valid MemoryRegion (sbuf, psum, private_hbm, shared_hbm)")


def is_hbm(buffer: Any) -> bool:
    """True for any HBM memory (``nl.hbm``, ``nl.private_hbm``, ``nl.shared_hbm``)."""
    return _memory(buffer, "is_hbm").is_hbm


def is_on_chip(buffer: Any) -> bool:
    """True for SBUF and PSUM."""
    return _memory(buffer, "is_on_chip").on_chip


def is_psum(buffer: Any) -> bool:
    return _memory(buffer, "is_psum") is _lang.psum


def is_sbuf(buffer: Any) -> bool:
    return _memory(buffer, "is_sbuf") is _lang.sbuf


def _memory(buffer: Any, api: str) -> _Buffer:
    if isinstance(buffer, NKITensor):  # a tensor answers for the memory it lives in
        return buffer.buffer
    if not isinstance(buffer, _Buffer):
        raise TypeError(f"nl.{api} takes a memory (nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm, ...), got "
                        f"{type(buffer).__name__}")
    return buffer


# The operator tensor_partition_reduce and tensor_reduce take for the mean (AWS lists it with add, max,
# bitwise_or and bitwise_and); like nl.bypass it is an argument of instructions, not a function.
average = _lang._isa_operator("average", "The mean, as the reduction operator of nisa.tensor_partition_reduce "
                                         "and nisa.tensor_reduce.")
average._nki_op = "mean"


class no_reorder:
    """``with nl.no_reorder():`` keeps the instructions of a block in program order. The simulator runs every
    instruction in program order already, so the block runs as written."""

    def __enter__(self) -> "no_reorder":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


# AWS's NKI 0.3+ signatures where they renamed the legacy parameters (x for src/data/a, print_prefix and
# tensor for device_print), with their new keywords (broadcast_to's dtype, rms_norm's compute_dtype); the
# new dialect has no mask=.

def copy(x: NKITensor, dtype: Any = None) -> NKITensor:
    """A copy of the tile ``x`` (cast to ``dtype`` if given)."""
    return _lang.copy(x, dtype=dtype)


copy._nki_op = "copy"  # also the Scalar engine's identity operator (nisa.activation(op=nl.copy, ...))


def zeros_like(x: NKITensor, dtype: Any = None, buffer: Any = None, name: str = "") -> NKITensor:
    return _lang.zeros_like(x, dtype, buffer=buffer, name=name)


def empty_like(x: NKITensor, dtype: Any = None, buffer: Any = None, name: str = "") -> NKITensor:
    return _lang.empty_like(x, dtype, buffer=buffer, name=name)


def expand_dims(x: NKITensor, axis: int) -> NKITensor:
    return _lang.expand_dims(x, axis)


def broadcast_to(x: NKITensor, shape: Any, dtype: Any = None) -> NKITensor:
    """``x`` broadcast to ``shape`` (same rank, each dimension equal or from 1); ``x`` itself when the shape
    is already ``shape`` and no other dtype is asked for, as AWS's reference says."""
    if tuple(x.shape) == tuple(shape):
        return x if dtype is None or _lang._dt.as_dtype(dtype) == x.dtype else _lang.copy(x, dtype=dtype)
    out = _lang.broadcast_to(x, shape=shape)
    return out if dtype is None else _lang.copy(out, dtype=dtype)


def rms_norm(x: NKITensor, w: Any, axis: Any, n: int, epsilon: float = 1e-06, dtype: Any = None,
             compute_dtype: Any = None) -> NKITensor:
    """``x / RMS(x) * w``; with ``compute_dtype`` each intermediate (square, sum, rsqrt) is rounded to it."""
    cd = compute_dtype
    ss = _lang.sum(_lang.square(x, dtype=cd), axis=axis, keepdims=True, dtype=cd)
    inv = _lang.rsqrt(_lang.add(_lang.divide(ss, float(n), dtype=cd), float(epsilon), dtype=cd), dtype=cd)
    return _lang.multiply(_lang.multiply(x, inv, dtype=cd), w, dtype=dtype)


def device_print(print_prefix: str, tensor: Any) -> None:
    _lang.device_print(print_prefix, tensor)


def affine_range(start: int, stop: Any = None, step: int = 1, *, directives: Any = None,
                 precise_schedule: bool = False) -> Any:
    return _lang.affine_range(*_range_args(start, stop, step))


def sequential_range(start: int, stop: Any = None, step: int = 1, *, directives: Any = None,
                     precise_schedule: bool = False) -> range:
    return range(*_range_args(start, stop, step))


def static_range(start: int, stop: Any = None, step: int = 1, *, directives: Any = None,
                 precise_schedule: bool = False) -> range:
    return range(*_range_args(start, stop, step))


def _range_args(start: int, stop: Any, step: int) -> tuple:
    return (0, start, step) if stop is None else (start, stop, step)

_LEGACY_ONLY = {"arange", "mgrid"}


def _without_mask(func: Callable) -> Callable:
    """The shared implementation ``func`` without the legacy ``mask=``: AWS's NKI 0.2+ dropped it ("The mask
    parameter is no longer supported"), so a kernel passing it here would fail in AWS's compiler."""
    signature = inspect.signature(func)
    if "mask" not in signature.parameters:
        return func

    @functools.wraps(func)
    def op(*args: Any, **kwargs: Any) -> Any:
        if "mask" in kwargs:
            raise TypeError(f"nl.{func.__name__}() got an unexpected keyword argument 'mask': NKI 0.2+ has no "
                            f"mask=; compute on a slice of the tile, or select with nl.where")
        return func(*args, **kwargs)
    op.__signature__ = signature.replace(parameters=[p for n, p in signature.parameters.items() if n != "mask"])
    return op


for _name, _value in list(globals().items()):
    if not _name.startswith("_") and inspect.isfunction(_value) and _value.__module__ == _lang.__name__:
        globals()[_name] = _without_mask(_value)
del _name, _value

# The shared implementation's own imports came with the star import; they are not AWS's names, and
# feature detection (hasattr(nl, name)) sees AWS's surface.
for _name in ("np", "math", "os", "functools", "inspect", "fail", "as_mask", "DynSlice", "NKIUnsupportedError",
              "UNMODELLED", "unmodelled", "Iterator", "Optional", "Sequence", "annotations"):
    globals().pop(_name, None)
del _name


def __getattr__(name: str) -> Any:
    if name in _LEGACY_ONLY:
        raise AttributeError(
            f"nl.{name} belongs to the legacy NKI dialect (neuronxcc.nki); in NKI 0.2+ index with slices and nl.ds, "
            f"or import torchneuron_ext.nki.legacy.language")
    from .._lang import unmodelled
    return unmodelled("nki.language", name)
