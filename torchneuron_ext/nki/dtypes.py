"""NKI data types (numpy dtypes; bf16 and fp8 from ml_dtypes) and the engines' promotion rules."""
from __future__ import annotations

from typing import Any, Callable

import ml_dtypes
import numpy as np

from . import float_bits

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
    if isinstance(dtype, str) and dtype in _X4_BY_NAME:
        return _X4_BY_NAME[dtype]
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
    if values.dtype.names is not None or np.dtype(dtype).names is not None:  # the packed MX dtypes are structured
        return _cast_packed(values, dtype)
    if not is_float(dtype) and dtype != bool_ and is_float(values.dtype):
        with np.errstate(invalid="ignore"):
            return np.rint(values).astype(dtype)
    return float_bits.from_float32(values, dtype)  # astype, vectorised into bf16 and the 8-bit floats


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


# --- MX (microscaling) packed dtypes -------------------------------------------------------------------------
# AWS's float8_*_x4 are 32 bits holding four fp8 values and float4_e2m1fn_x4 is 16 bits holding four fp4 values
# (deep-dive "MXFP Matrix Multiplication"). numpy has no such scalar types, so each is a one-field structured
# dtype over the raw unsigned word: the right size for allocation and DMA, distinct from each other and from
# uint32/uint16 (the field name differs), and refused by every ufunc, so no engine computes on packed words by
# accident. Element j of a word sits in its byte (fp8) or nibble (fp4) j, least significant first: the order
# AWS's NKI Library unpacks them in.
float4_e2m1fn = np.dtype(ml_dtypes.float4_e2m1fn)
float8_e4m3fn_x4 = np.dtype([("float8_e4m3fn_x4", "<u4")])
float8_e5m2_x4 = np.dtype([("float8_e5m2_x4", "<u4")])
float4_e2m1fn_x4 = np.dtype([("float4_e2m1fn_x4", "<u2")])

X4_PACK = 4  # logical elements per packed x4 element
_X4_ELEMENT = {float8_e4m3fn_x4: float8_e4m3fn, float8_e5m2_x4: float8_e5m2, float4_e2m1fn_x4: float4_e2m1fn}
_X4_WORD = {float8_e4m3fn_x4: np.dtype("<u4"), float8_e5m2_x4: np.dtype("<u4"), float4_e2m1fn_x4: np.dtype("<u2")}
_X4_BY_NAME = {"float8_e4m3fn_x4": float8_e4m3fn_x4, "float8_e5m2_x4": float8_e5m2_x4,
               "float4_e2m1fn_x4": float4_e2m1fn_x4}
_NAMES.update({float8_e8m0fnu: "float8_e8m0fnu", float4_e2m1fn: "float4_e2m1fn",
               float8_e4m3fn_x4: "float8_e4m3fn_x4", float8_e5m2_x4: "float8_e5m2_x4",
               float4_e2m1fn_x4: "float4_e2m1fn_x4"})
_FLOATS.add(float4_e2m1fn)


def refuse_packed(dtype: Any, what: str) -> None:
    """The error for an engine computing on packed MX data: numpy would read the raw words as numbers."""
    from .errors import fail
    fail("err_unsupported_dtype",
         f"{what} {name(as_dtype(dtype))}: a packed MX element holds four fp8/fp4 values and no engine computes on "
         f"it; nisa.quantize_mx writes it, nisa.nc_matmul_mx reads it, and DMA or a copy into the same dtype "
         f"moves it unchanged")


def _cast_packed(values: np.ndarray, dtype: Any) -> np.ndarray:
    # Zero bits are +0.0 in every element type, so memset(value=0), AWS's one x4 memset, is a cast.
    if is_x4(dtype) and not is_x4(values.dtype) and values.dtype.kind in "biuf" and not np.any(values):
        return np.zeros(values.shape, as_dtype(dtype))
    refuse_packed(values.dtype if is_x4(values.dtype) else dtype,
                  "cannot convert to" if is_x4(dtype) else "cannot convert from")
    raise AssertionError("unreachable")


def is_x4(dtype: Any) -> bool:
    """Whether ``dtype`` is one of the packed MX dtypes (float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4)."""
    try:
        return as_dtype(dtype) in _X4_ELEMENT
    except TypeError:
        return False


def x4_element(dtype: Any) -> np.dtype:
    """The dtype of one of the four values a packed MX element holds (fp8 e4m3fn/e5m2, or fp4 e2m1fn)."""
    d = as_dtype(dtype)
    if d not in _X4_ELEMENT:
        raise TypeError(f"{name(d)} is not a packed MX dtype (float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4)")
    return _X4_ELEMENT[d]


def x4_word(dtype: Any) -> np.dtype:
    """The unsigned integer dtype of a packed MX element's raw bits (uint32 for fp8 x4, uint16 for fp4 x4)."""
    x4_element(dtype)
    return _X4_WORD[as_dtype(dtype)]


def pack_x4(values: Any, dtype: Any) -> np.ndarray:
    """Host-side cast into a packed MX dtype: round ``values`` (any float array, or already of the element
    dtype) to the element dtype with round-to-nearest-even and pack each 4 consecutive values of the last axis
    into one x4 element. Shape [..., 4n] becomes [..., n]."""
    x4 = as_dtype(dtype)
    elem = x4_element(x4)
    arr = np.asarray(values)
    if arr.ndim == 0 or arr.shape[-1] % X4_PACK:
        raise ValueError(f"packing into {name(x4)} takes 4 values per element: the last axis of shape "
                         f"{arr.shape} is not a multiple of 4")
    if arr.dtype != elem:  # through float32, as before the casts were vectorised
        arr = float_bits.from_float32(float_bits.to_float32(arr), elem)
    bits = np.ascontiguousarray(arr).view(np.uint8).reshape(*arr.shape[:-1], arr.shape[-1] // X4_PACK, X4_PACK)
    word = _X4_WORD[x4]
    if elem == float4_e2m1fn:
        bits = (bits & 0xF).astype(word)
        packed = bits[..., 0] | (bits[..., 1] << 4) | (bits[..., 2] << 8) | (bits[..., 3] << 12)
        return np.ascontiguousarray(packed.astype(word)).view(x4)
    return np.ascontiguousarray(bits).view(word).reshape(bits.shape[:-1]).view(x4)


def unpack_x4(packed: Any, dtype: Any = None) -> np.ndarray:
    """Host-side unpacking of MX data: an array of a packed MX dtype (or its raw uint32/uint16 words, with
    ``dtype`` naming the packed dtype) becomes an array of the element dtype with a 4x longer last axis."""
    arr = np.asarray(packed)
    x4 = as_dtype(dtype) if dtype is not None else arr.dtype
    elem = x4_element(x4)
    word = _X4_WORD[x4]
    if arr.dtype.itemsize != word.itemsize:
        raise TypeError(f"unpacking {name(x4)} takes {word.itemsize}-byte elements, got {name(arr.dtype)}")
    if arr.ndim == 0:
        arr = arr.reshape(1)
    raw = np.ascontiguousarray(arr).view(word)
    if elem == float4_e2m1fn:
        nibbles = np.stack([(raw >> s) & 0xF for s in (0, 4, 8, 12)], axis=-1).astype(np.uint8)
        return nibbles.reshape(*raw.shape[:-1], raw.shape[-1] * X4_PACK).view(elem)
    return raw.view(np.uint8).reshape(*raw.shape[:-1], raw.shape[-1] * X4_PACK).view(elem)


def host_cast(values: Any, dtype: Any) -> np.ndarray:
    """A host cast that understands the packed MX dtypes (what AWS's ``neuron_dtypes.static_cast`` does):
    into an x4 dtype packs (last axis / 4), out of one unpacks (last axis x 4) and then casts; any other
    pair is numpy's cast with round-to-nearest."""
    arr = np.asarray(values)
    target = as_dtype(dtype)
    if is_x4(target):
        return arr.copy() if arr.dtype == target else pack_x4(arr, target)
    if is_x4(arr.dtype):
        # AWS's MX goldens dequantize with static_cast(data_x4, float32) and expect [P, F // 4] -> [P, F]
        arr = unpack_x4(arr)
    if arr.dtype == target:
        return arr.copy()
    if target == float32:
        return float_bits.to_float32(arr)  # widening by bits or a table, not ml_dtypes' element loop
    return float_bits.from_float32(arr, target)  # astype, vectorised into bf16 and the 8-bit floats


def as_strided(base: np.ndarray, shape: tuple, strides: tuple, writeable: bool = True) -> np.ndarray:
    """``np.lib.stride_tricks.as_strided`` for every dtype here: numpy rebuilds the view from its array
    interface, whose type string for ml_dtypes' 1-byte floats ('<f1') it cannot parse, so those are strided
    as unsigned integers of their size and viewed back."""
    dtype = base.dtype
    if dtype.isbuiltin == 1:
        return np.lib.stride_tricks.as_strided(base, shape=shape, strides=strides, writeable=writeable)
    carrier = base.view(np.dtype(f"u{dtype.itemsize}"))
    return np.lib.stride_tricks.as_strided(carrier, shape=shape, strides=strides, writeable=writeable).view(dtype)
