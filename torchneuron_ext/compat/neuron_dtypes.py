"""``neuron_dtypes`` (and ``neuronxcc.starfish.support.dtype``): AWS's host-side numpy dtype helpers.

AWS's NKI Library tests import ``neuron_dtypes``, a package of the Neuron toolchain that is not public, to
build golden references: ``static_cast(array, dtype)`` (a numpy cast into Neuron's dtypes, bfloat16 and fp8
included, and into and out of the packed MX ``*_x4`` dtypes), ``sizeinbytes``, ``finfo``, ``is_float_type`` and the
dtype objects themselves. Older tests import ``static_cast`` from ``neuronxcc.starfish.support.dtype``.
With the product aliases installed (compat/aliases.py) both names are this module.

The dtypes are the NKI simulator's (nki/dtypes.py: numpy dtypes, ml_dtypes for bfloat16 and fp8), so a
golden reference and a kernel's tensors agree on what ``bfloat16`` is. Casts round to nearest, ties to
even, as ml_dtypes does (and the hardware's engines do); a float cast to an integer dtype truncates toward
zero, as C's static_cast does.
"""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from ..nki import dtypes as _dtypes

__all__ = ["static_cast", "sizeinbytes", "finfo", "iinfo", "is_float_type", "bfloat16", "float16", "float32",
           "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "int8", "int16", "int32", "uint8",
           "uint16", "uint32"]

bfloat16 = _dtypes.bfloat16
float16, float32 = _dtypes.float16, _dtypes.float32
float8_e4m3, float8_e4m3fn, float8_e5m2 = _dtypes.float8_e4m3, _dtypes.float8_e4m3fn, _dtypes.float8_e5m2
float8_e8m0fnu = _dtypes.float8_e8m0fnu
int8, int16, int32 = _dtypes.int8, _dtypes.int16, _dtypes.int32
uint8, uint16, uint32 = _dtypes.uint8, _dtypes.uint16, _dtypes.uint32


def __getattr__(name: str) -> Any:
    # Every other Neuron dtype is the simulator's own (the packed MX float8_e4m3fn_x4, float8_e5m2_x4,
    # float4_e2m1fn_x4 and float4_e2m1fn among them), so the two can never disagree on one.
    value = getattr(_dtypes, name, None) if not name.startswith("_") else None
    if isinstance(value, np.dtype):
        return value
    raise AttributeError(f"module 'neuron_dtypes' has no attribute {name!r} (torchneuron_ext's stand-in provides "
                         f"the NKI simulator's dtypes and {', '.join(__all__[:5])})")


def _dtype(dtype: Any) -> np.dtype:
    return _dtypes.as_dtype(dtype)


def static_cast(values: Any, dtype: Any) -> np.ndarray:
    """``values`` as a numpy array of ``dtype``: round to nearest even into float dtypes (bfloat16, fp8),
    truncation toward zero into integer dtypes; into a packed MX dtype (``float8_e4m3fn_x4``...), each 4
    consecutive values of the last axis are rounded to the element dtype and packed into one element; out of
    one, each element is unpacked into its 4 values (the last axis 4 times longer) and those are cast. The
    simulator's own host cast (nki/dtypes.py ``host_cast``), with NaN-to-integer casts left silent."""
    with np.errstate(invalid="ignore"):
        return _dtypes.host_cast(values, dtype)


def sizeinbytes(dtype: Any) -> int:
    """Bytes of one element of ``dtype`` (a packed MX element counts its 4 values: 4 bytes for fp8 x4)."""
    return int(_dtype(dtype).itemsize)


def finfo(dtype: Any) -> Any:
    """The limits of a float dtype (``.max``, ``.min``, ``.eps``, ``.bits``, ``.dtype``), bfloat16 and fp8
    included."""
    d = _dtype(dtype)
    if not is_float_type(d):
        raise TypeError(f"neuron_dtypes.finfo takes a floating-point dtype, got {_dtypes.name(d)}; use iinfo")
    return np.finfo(d) if d in (float16, float32, np.dtype(np.float64)) else ml_dtypes.finfo(d)


def iinfo(dtype: Any) -> np.iinfo:
    """The limits of an integer dtype."""
    return np.iinfo(_dtype(dtype))


def is_float_type(dtype: Any) -> bool:
    """Whether ``dtype`` is a floating-point dtype: numpy's and Neuron's (bfloat16, fp8, fp4)."""
    d = _dtype(dtype)
    return d.kind == "f" or _dtypes.is_float(d)
