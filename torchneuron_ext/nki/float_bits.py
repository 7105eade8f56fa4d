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
    does: overflow to infinity, a NaN becomes the canonical quiet NaN with its sign); a float64 array rounds
    into bfloat16 once, as ml_dtypes does (not through float32); an fp8 array to any unstructured dtype is a
    lookup of ml_dtypes' result per pattern (a (128, 128) fp8 -> bf16 weight upcast was 7x slower through
    astype); other dtypes go through ``astype``."""
    if values.dtype in _FP8 and values.ndim and np.dtype(dtype).names is None:
        return np.take(_fp8_table(values.dtype, np.dtype(dtype)), values.view(np.uint8))
    if values.dtype not in (_F32, _F64) or np.dtype(dtype) != _BF16 or values.ndim == 0:
        return values.astype(dtype)
    out = np.empty(values.shape, dtype=np.uint16)
    narrow = _f32_to_bf16_bits if values.dtype == _F32 else _f64_to_bf16_bits
    if values.size <= _CHUNK:
        narrow(np.ascontiguousarray(values).reshape(-1), out.reshape(-1))
        return out.view(_BF16)
    # Large arrays (the NKI Library harness casts whole KV caches and weights) go in cache-sized blocks: the
    # temporaries are reused instead of array-sized, which on a VM pays a page fault per fresh page.
    flat_out = out.reshape(-1)
    if values.flags.c_contiguous:
        flat = values.reshape(-1)
        for start in range(0, flat.size, _CHUNK):
            narrow(flat[start:start + _CHUNK], flat_out[start:start + _CHUNK])
    else:
        rows = max(1, _CHUNK // max(1, values[0].size))
        for start in range(0, values.shape[0], rows):
            block = np.ascontiguousarray(values[start:start + rows]).reshape(-1)
            begin = start * values[0].size
            narrow(block, flat_out[begin:begin + block.size])
    return out.view(_BF16)


_F64 = np.dtype(np.float64)
_CHUNK = 1 << 16  # elements per block of a large cast: 256 KiB of float32 temporaries, in L2


def _f32_to_bf16_bits(values: np.ndarray, out: np.ndarray) -> None:
    """Round contiguous 1-D float32 ``values`` to nearest even into bfloat16 bit patterns ``out`` (uint16)."""
    bits = values.view(np.uint32)
    # In place on one temporary, the last shift narrowing as it stores (10% fewer passes than the expression).
    rounded = np.right_shift(bits, np.uint32(16))
    np.bitwise_and(rounded, np.uint32(1), out=rounded)
    np.add(rounded, np.uint32(0x7FFF), out=rounded)
    np.add(rounded, bits, out=rounded)
    np.right_shift(rounded, np.uint32(16), out=out, casting="unsafe")
    nan = np.isnan(values)
    if nan.any():
        out[nan] = ((bits[nan] >> np.uint32(16)) & np.uint32(0x8000) | np.uint32(0x7FC0)).astype(np.uint16)


def _f64_to_bf16_bits(values: np.ndarray, out: np.ndarray) -> None:
    """Round contiguous 1-D float64 ``values`` to nearest even into bfloat16 bit patterns ``out``, once.

    Through float32 rounded to odd: the float64 -> float32 cast rounds to nearest, the result is moved to
    the truncation (one step toward zero where the cast rounded away) with its last bit set where inexact.
    Rounding to odd keeps 16 bits more than bfloat16 has (subnormals included), so the second rounding to
    nearest even gives the single rounding's result: the 1 + 2**-8 + 2**-30 that float32 would round to a
    tie, then to 1.0, becomes 1 + 2**-7 as in ml_dtypes."""
    with np.errstate(over="ignore", invalid="ignore"):
        narrow = values.astype(np.float32)
    wide = narrow.astype(np.float64)
    inexact = wide != values  # NaN too: its last bit set leaves it a NaN, then canonical below
    np.abs(wide, out=wide)
    away = wide > np.abs(values)
    bits = narrow.view(np.uint32)
    np.subtract(bits, away, out=bits, casting="unsafe")
    np.bitwise_or(bits, inexact, out=bits, casting="unsafe")
    _f32_to_bf16_bits(narrow, out)
