"""Bit-exact, vectorised conversions between float32 and the narrow float dtypes (bfloat16, fp8).

ml_dtypes converts element by element in a C loop per cast, which made casts the largest single cost of
bf16 and fp8 kernels in the simulator (a bf16 (128, 512) tile: 85 us to float32, 240 us back; fp8: 1.3 ms).
The same results come from integer arithmetic on the bit patterns: a bfloat16 is the top half of a float32,
an 8-bit float has 256 values (a table). Results are identical to ml_dtypes' ``astype``, NaNs included
(tests/nki/test_float_bits.py compares them over every bf16/fp8 pattern and float32 specials).
"""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

_BF16 = np.dtype(ml_dtypes.bfloat16)
_F32 = np.dtype(np.float32)
_F16 = np.dtype(np.float16)
_FP8 = tuple(np.dtype(d) for d in (ml_dtypes.float8_e4m3, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                   ml_dtypes.float8_e8m0fnu))


@functools.lru_cache(maxsize=None)
def _fp8_table(dtype: np.dtype, to: np.dtype = _F32) -> np.ndarray:
    # ml_dtypes' own result for each of the 256 patterns, so a lookup is its astype bit for bit.
    with np.errstate(all="ignore"):
        return np.arange(256, dtype=np.uint8).view(dtype).astype(to)


@functools.lru_cache(maxsize=None)
def _fp16_table() -> np.ndarray:
    # numpy's float16 -> float32 astype has no vector path on this CPU (F16C unused): a lookup of its own
    # result per pattern (256 KiB) is twice as fast, bit for bit.
    return np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32)


def to_float32(values: np.ndarray) -> np.ndarray:
    """``values.astype(float32)`` for a bfloat16, float16 or fp8 array, without ml_dtypes' (or numpy's scalar)
    per-element loop; any other dtype goes through ``astype`` (a float32 array is returned as it is)."""
    dtype = values.dtype
    if dtype == _BF16:
        # One pass: the shift widens as it goes (astype then << made two arrays, a third of a matmul's cast).
        return np.left_shift(values.view(np.uint16), 16, dtype=np.uint32).view(np.float32)
    if dtype in _FP8:
        return np.take(_fp8_table(dtype), values.view(np.uint8))
    if dtype == _F16 and values.ndim:
        return np.take(_fp16_table(), values.view(np.uint16))
    return values.astype(np.float32, copy=False)


def from_float32(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``values.astype(dtype)`` for a float32 array: bfloat16 rounds to nearest even on the bits (as ml_dtypes
    does: overflow to infinity, a NaN becomes the canonical quiet NaN with its sign); an fp8 array to any
    unstructured dtype is a lookup of ml_dtypes' result per pattern (a (128, 128) fp8 -> bf16 weight upcast
    was 7x slower through astype); other dtypes go through ``astype``."""
    if values.dtype in _FP8 and values.ndim and np.dtype(dtype).names is None:
        return np.take(_fp8_table(values.dtype, np.dtype(dtype)), values.view(np.uint8))
    if values.dtype != _F32 or np.dtype(dtype) != _BF16 or values.ndim == 0:
        return values.astype(dtype)
    bits = np.ascontiguousarray(values).view(np.uint32)
    # In place on one temporary, the last shift narrowing as it stores (10% fewer passes than the expression).
    rounded = np.right_shift(bits, np.uint32(16))
    np.bitwise_and(rounded, np.uint32(1), out=rounded)
    np.add(rounded, np.uint32(0x7FFF), out=rounded)
    np.add(rounded, bits, out=rounded)
    out = np.empty(values.shape, dtype=np.uint16)
    np.right_shift(rounded, np.uint32(16), out=out, casting="unsafe")
    nan = values != values
    if nan.any():
        out[nan] = ((bits[nan] >> np.uint32(16)) & np.uint32(0x8000) | np.uint32(0x7FC0)).astype(np.uint16)
    return out.view(_BF16)
