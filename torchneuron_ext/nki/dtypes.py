"""NKI data types (numpy dtypes; bf16 and fp8 from ml_dtypes) and the engines' promotion rules."""
from __future__ import annotations

from typing import Any, Callable

import ml_dtypes
import numpy as np

bool_ = np.dtype(np.bool_)
int8, int16, int32 = np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32)
uint8, uint16, uint32 = np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32)
float16, float32 = np.dtype(np.float16), np.dtype(np.float32)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
# tf32 has fp32's range and a 10-bit mantissa; the Tensor engine reads it as fp32 here.
tfloat32 = float32
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float8_e8m0fnu = np.dtype(ml_dtypes.float8_e8m0fnu)

_FLOATS = {float16, float32, bfloat16, float8_e4m3, float8_e4m3fn, float8_e5m2, float8_e8m0fnu}
_FP8 = {float8_e4m3, float8_e4m3fn, float8_e5m2, float8_e8m0fnu}


# Other libraries' dtype objects, by the module their type is defined in: an integration registers its
# converter (nki/torch registers torch's), so the core accepts them without importing the library.
_FOREIGN: dict[str, Callable[[Any], np.dtype]] = {}


def register_foreign_dtypes(module: str, convert: Callable[[Any], np.dtype]) -> None:
    """Let ``as_dtype`` accept dtype objects whose type is defined in ``module`` (e.g. "torch")."""
    _FOREIGN[module] = convert


def as_dtype(dtype: Any) -> np.dtype:
    """Accept NKI dtypes, numpy dtypes and scalar types, registered foreign dtypes (torch's) and names such
    as "bfloat16"."""
    if dtype is None:
        raise TypeError("dtype is None")
    if isinstance(dtype, np.dtype):
        return dtype
    if isinstance(dtype, DtypeAlias):
        return dtype.dtype
    convert = _FOREIGN.get(type(dtype).__module__)
    if convert is not None:
        return convert(dtype)
    if isinstance(dtype, str) and hasattr(ml_dtypes, dtype):
        return np.dtype(getattr(ml_dtypes, dtype))
    return np.dtype(dtype)


def is_float(dtype: np.dtype) -> bool:
    return dtype in _FLOATS or dtype.kind == "f"


def itemsize(dtype: np.dtype) -> int:
    return np.dtype(dtype).itemsize


def _promote_pair(a: np.dtype, b: np.dtype) -> np.dtype:
    if a == b:
        return a
    fa, fb = is_float(a), is_float(b)
    if fa and not fb:
        return a
    if fb and not fa:
        return b
    if fa and fb:
        if {a, b} == {float16, bfloat16}:
            return float32
        if a in _FP8 and b in _FP8:
            return bfloat16
        if a in _FP8:
            return b
        if b in _FP8:
            return a
        return a if a.itemsize > b.itemsize else b
    if a == bool_:
        return b
    if b == bool_:
        return a
    if a.kind != b.kind:  # signed with unsigned
        if {a, b} == {int32, uint32}:
            return float32
        signed, unsigned = (a, b) if a.kind == "i" else (b, a)
        if signed.itemsize > unsigned.itemsize:
            return signed
        return {1: int16, 2: int32, 4: float32}[unsigned.itemsize]
    return a if a.itemsize > b.itemsize else b


def weak_scalar_dtype(value: Any) -> np.dtype:
    """Python scalars are not weak on Neuron's engines: int is int32, float is fp32, bool is uint8."""
    if isinstance(value, (bool, np.bool_)):
        return uint8
    if isinstance(value, (int, np.integer)):
        return int32
    return float32


def promote(*dtypes: np.dtype) -> np.dtype:
    """The output dtype of an engine op over inputs of these dtypes (NKI's rules, section 'Data types')."""
    out = dtypes[0]
    for d in dtypes[1:]:
        out = _promote_pair(out, d)
    return out


def cast(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Cast an fp32 engine result to its output dtype: round to nearest for floats, saturate nothing."""
    if values.dtype == dtype:
        return values
    if not is_float(dtype) and dtype != bool_ and is_float(values.dtype):
        with np.errstate(invalid="ignore"):
            return np.rint(values).astype(dtype)
    return values.astype(dtype)


_NAMES = {bool_: "bool", int8: "int8", int16: "int16", int32: "int32", uint8: "uint8", uint16: "uint16",
          uint32: "uint32", float16: "float16", float32: "float32", bfloat16: "bfloat16",
          float8_e4m3: "float8_e4m3", float8_e4m3fn: "float8_e4m3fn", float8_e5m2: "float8_e5m2"}


def name(dtype: np.dtype) -> str:
    return _NAMES.get(np.dtype(dtype), str(dtype))


class DtypeAlias:
    """``nl.fp32`` and the other short names: the dtype, plus its limits as attributes
    (``nl.fp32.min`` is how the flash-attention kernels write minus infinity's stand-in)."""

    __slots__ = ("dtype", "_info")

    def __init__(self, dtype: np.dtype) -> None:
        self.dtype = dtype
        self._info = finfo(dtype) if is_float(dtype) else np.iinfo(dtype)

    def __getattr__(self, name: str) -> Any:
        if name in ("min", "max", "eps", "tiny", "bits", "resolution", "smallest_normal"):
            return getattr(self._info, name)
        return getattr(self.dtype, name)  # itemsize, name, kind...

    def __eq__(self, other: Any) -> bool:
        try:
            return self.dtype == as_dtype(other)
        except TypeError:
            return NotImplemented

    def __hash__(self) -> int:
        return hash(self.dtype)

    def __repr__(self) -> str:
        return f"nl.{name(self.dtype)}"


def finfo(dtype: Any) -> Any:
    """``nl.finfo(dtype)``: min, max, eps, tiny, bits of a float dtype (bf16 and fp8 included)."""
    d = as_dtype(dtype)
    if not is_float(d):
        raise TypeError(f"nl.finfo takes a floating-point dtype, got {name(d)}; use nl.iinfo for integers")
    return np.finfo(d) if d in (float16, float32) else ml_dtypes.finfo(d)


def iinfo(dtype: Any) -> Any:
    """``nl.iinfo(dtype)``: min, max, bits of an integer dtype."""
    d = as_dtype(dtype)
    if is_float(d) or d == bool_:
        raise TypeError(f"nl.iinfo takes an integer dtype, got {name(d)}; use nl.finfo for floats")
    return np.iinfo(d)


fp32, fp16, bf16, tf32 = DtypeAlias(float32), DtypeAlias(float16), DtypeAlias(bfloat16), DtypeAlias(tfloat32)
fp8_e4m3, fp8_e5m2 = DtypeAlias(float8_e4m3), DtypeAlias(float8_e5m2)
