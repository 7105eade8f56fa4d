"""Bit-exact, vectorised conversions between float32 and the narrow float dtypes (bfloat16, fp8, e8m0, fp4).

ml_dtypes converts element by element in a C loop per cast, which made casts the largest single cost of
bf16 and fp8 kernels in the simulator (a bf16 (128, 512) tile: 85 us to float32, 240 us back; fp8: 1.3 ms).
The same results come from integer arithmetic on the bit patterns: a bfloat16 is the top half of a float32,
an 8-bit float has 256 values (a table), and a float32 narrows into one by a 65,536-entry table indexed by its
upper half with a sticky bit (``_f32_to_byte_bits``). Results are identical to ml_dtypes' ``astype``, NaNs
included (tests/nki/test_float_bits.py compares them over every bf16/fp16/fp8 pattern, random float32 bits,
every fp8 rounding midpoint and float32 specials). Narrowing a (128, 512) float32 tile into an 8-bit float:
78-140 us against ml_dtypes' 185-350 us, 2.1-3.5x (``bench/nki_simulator.py --only casts``, load 4-5 on two
cores, ml_dtypes 0.7.0; the 1.3 ms above was measured under conditions not recorded).
"""
from __future__ import annotations

import functools
from typing import Callable, Optional

import ml_dtypes
import numpy as np

_BF16 = np.dtype(ml_dtypes.bfloat16)
_F32 = np.dtype(np.float32)
_F16 = np.dtype(np.float16)
_FP8 = tuple(np.dtype(d) for d in (ml_dtypes.float8_e4m3, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                   ml_dtypes.float8_e8m0fnu))
# The 8-bit floats the simulator uses: fp8, the MX scale e8m0 and fp4 e2m1 (one value per byte in ml_dtypes).
_BYTE_FLOATS = _FP8 + (np.dtype(ml_dtypes.float4_e2m1fn),)


@functools.lru_cache(maxsize=None)
def _fp8_table(dtype: np.dtype, to: np.dtype = _F32) -> np.ndarray:
    # ml_dtypes' own result for each of the 256 patterns, so a lookup is its astype bit for bit.
    with np.errstate(all="ignore"):
        return np.arange(256, dtype=np.uint8).view(dtype).astype(to)


@functools.lru_cache(maxsize=None)
def _narrow_table(source: np.dtype, dtype: np.dtype) -> np.ndarray:
    # ml_dtypes' own result (uint8 patterns) for each of the 65,536 bfloat16 or float16 patterns; for a float32
    # source, each of its upper halves with the lower half zero (the same numbers as bfloat16's, but through
    # ml_dtypes' float32 cast).
    patterns = np.arange(65536, dtype=np.uint16)
    if source == _F32:
        values = np.left_shift(patterns, 16, dtype=np.uint32).view(np.float32)
    else:
        values = patterns.view(source)
    with np.errstate(all="ignore"):
        return values.astype(dtype).view(np.uint8)


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
        return bf16_to_float32(values)
    if dtype in _BYTE_FLOATS:
        return _lookup(_fp8_table(dtype), values)
    if dtype == _F16 and values.ndim:
        return np.take(_fp16_table(), values.view(np.uint16))
    return values.astype(np.float32, copy=False)


def bf16_to_float32(values: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """A bfloat16 array's exact float32 values, into ``out`` (float32, the same shape) if given: the native loop
    where the torch integration registered it and the layout suits it, else one numpy pass."""
    if bf16_widen is not None and values.ndim:
        if out is None:
            out = np.empty(values.shape, np.float32)
        if bf16_widen(values, out):
            return out
    # One pass: the shift widens as it goes (astype then << made two arrays, a third of a matmul's cast).
    bits = values.view(np.uint16)
    if out is None:
        return np.left_shift(bits, 16, dtype=np.uint32).view(np.float32)
    return np.left_shift(bits, 16, out=out.view(np.uint32), dtype=np.uint32).view(np.float32)


def has_nan(values: np.ndarray) -> bool:
    """Whether a bfloat16 array holds a NaN (by its bits: ml_dtypes' isnan is an element loop)."""
    if values.dtype != _BF16:
        return bool(np.isnan(values).any())
    magnitude = np.bitwise_and(values.view(np.uint16), np.uint16(0x7FFF))
    return bool(magnitude.size) and int(magnitude.max()) > 0x7F80


def from_float32(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``values.astype(dtype)``, bit for bit, without ml_dtypes' per-element loop where it can be helped.

    Into bfloat16 from float32 rounds to nearest even on the bits (as ml_dtypes does: overflow to infinity, a
    NaN becomes the canonical quiet NaN with its sign). Into an 8-bit float (fp8, e8m0, fp4) from float32 is a
    lookup of ml_dtypes' result by the upper 16 bits, the lower 16 folded into the lowest of them as a sticky
    bit (``_f32_to_byte_bits``); from bfloat16 or float16 a lookup by the whole pattern. A float64 array
    rounds into either once, as ml_dtypes does (not through float32). An 8-bit float array to any unstructured
    dtype is a lookup of ml_dtypes' result per pattern (a (128, 128) fp8 -> bf16 weight upcast was 7x slower
    through astype). Other pairs, and 0-d arrays, go through ``astype``."""
    target = np.dtype(dtype)
    source = values.dtype
    if source in _BYTE_FLOATS and values.ndim and target.names is None:
        return _lookup(_fp8_table(source, target), values)
    if values.ndim == 0:
        return values.astype(target)
    if target == _BF16 and source in (_F32, _F64):
        if source == _F32 and _bf16_narrow is not None:
            out = np.empty(values.shape, np.uint16)
            if _bf16_narrow(values, out):
                return out.view(_BF16)
        narrow = _f32_to_bf16_bits if source == _F32 else _f64_to_bf16_bits
        return _in_blocks(values, np.uint16, narrow).view(_BF16)
    if target in _BYTE_FLOATS and source in (_F32, _F64, _BF16, _F16):
        if source in (_BF16, _F16):
            narrow = functools.partial(_16_to_byte_bits, table=_narrow_table(source, target))
        else:
            table = _narrow_table(_F32, target)
            narrow = functools.partial(_f32_to_byte_bits if source == _F32 else _f64_to_byte_bits, table=table)
        return _in_blocks(values, np.uint8, narrow).view(target)
    if target == _F16 and source == _F32 and values.size >= _F16_ACCELERATED_MIN and _f16_narrow is not None:
        narrowed = _f16_narrow(values)
        if narrowed is not None:
            return narrowed
    return values.astype(target)


# numpy converts between float32 and float16 one element at a time (45 us to narrow a (128, 128) tile here; in
# AWS's fp16 moe_tkg the narrowing was a twentieth of the launch, the matmul operands' widening a seventh). The
# CPU's F16C does it in vectors: torch's conversions use it, and the torch integration registers them here
# (nki/torch/float16.py); the core itself stays numpy-only. Under this size the call overhead wins.
_F16_ACCELERATED_MIN = 4096
_f16_narrow: "Callable[[np.ndarray], np.ndarray | None] | None" = None
f16_widen: "Callable[[np.ndarray, np.ndarray | None], np.ndarray | None] | None" = None


def register_float16_conversions(narrow: Callable, widen: Callable) -> None:
    """``narrow(float32 array)``: its float16 values with numpy's bits, or None where the converter cannot give
    them (from_float32 then uses numpy's); ``widen(float16 array, out or None)``: float32 values for a matmul
    operand (a signalling NaN may come out quiet, which the product's arithmetic does anyway), or None."""
    global _f16_narrow, f16_widen
    _f16_narrow, f16_widen = narrow, widen


# numpy narrows a float32 tile into bfloat16 in seven passes (42 us for a (128, 512) tile here): the torch
# integration registers a one-pass native loop with the same bits (nki/torch/native_casts.py, 6-9 us), and one for
# widening (12 -> 6 us). Each takes the source and a destination array of the same shape and says whether it
# could (the layout must be rows of contiguous elements).
_bf16_narrow: "Callable[[np.ndarray, np.ndarray], bool] | None" = None
bf16_widen: "Callable[[np.ndarray, np.ndarray], bool] | None" = None


def register_bfloat16_conversions(narrow: Callable, widen: Callable) -> None:
    """``narrow(float32 array, uint16 array)`` stores ml_dtypes' bfloat16 bits of the first into the second,
    ``widen(bfloat16 array, float32 array)`` the exact values; each returns False, storing nothing, where it
    cannot (from_float32 and to_float32 then use numpy's passes)."""
    global _bf16_narrow, bf16_widen
    _bf16_narrow, bf16_widen = narrow, widen


# numpy's take of a 256-entry table by an 8-bit float's bytes: 53 us for a (128, 512) fp8 tile into bfloat16
# here (AWS's quantized MoE dequantizes its weights this way); registered by the torch integration, a native
# loop over rows of bytes (nki/torch/native_casts.py). It returns False where it cannot (numpy's take then).
_byte_lookup: "Callable[[np.ndarray, np.ndarray, np.ndarray], bool] | None" = None


def register_byte_lookup(lookup: Callable) -> None:
    """``lookup(table, values, out)``: ``out[...] = table[values.view(uint8)]`` for a table of 256 entries of
    2 or 4 bytes and ``out`` of the table's dtype and the values' shape, or False, storing nothing."""
    global _byte_lookup
    _byte_lookup = lookup


def _lookup(table: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The table's entries for an 8-bit float array's bytes, in an array of the values' shape."""
    if _byte_lookup is not None and values.ndim and table.itemsize in (2, 4):
        out = np.empty(values.shape, table.dtype)
        if _byte_lookup(table, values, out):
            return out
    return np.take(table, values.view(np.uint8))


def _in_blocks(values: np.ndarray, bits: type, narrow: Callable[[np.ndarray, np.ndarray], None]) -> np.ndarray:
    """``narrow(block, out_block)`` over contiguous 1-D blocks of ``values`` into a new C-contiguous array of
    ``bits`` (the target's unsigned integer of its width) of the same shape."""
    out = np.empty(values.shape, dtype=bits)
    if values.size <= _CHUNK:
        narrow(np.ascontiguousarray(values).reshape(-1), out.reshape(-1))
        return out
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
    return out


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
    """Round contiguous 1-D float64 ``values`` to nearest even into bfloat16 bit patterns ``out``, once."""
    _f32_to_bf16_bits(_f64_to_odd_f32(values), out)


def _f64_to_odd_f32(values: np.ndarray) -> np.ndarray:
    """Contiguous 1-D float64 ``values`` rounded to odd into float32, for a second rounding that is then the
    single rounding's result.

    The float64 -> float32 cast rounds to nearest, the result is moved to the truncation (one step toward
    zero where the cast rounded away) with its last bit set where inexact. Rounding to odd keeps more bits
    than the narrow dtype has, plus two (16 more than bfloat16, subnormals included; 20 more than an fp8),
    so the second rounding to nearest even gives the single rounding's result: the 1 + 2**-8 + 2**-30 that
    float32 would round to a tie, then to 1.0, becomes 1 + 2**-7 in bfloat16 as in ml_dtypes. A finite value
    beyond float32's range becomes its largest finite value, odd: past every narrow dtype's range too."""
    with np.errstate(over="ignore", invalid="ignore"):
        narrow = values.astype(np.float32)
    wide = narrow.astype(np.float64)
    inexact = wide != values  # NaN too: its last bit set leaves it a NaN, then canonical
    np.abs(wide, out=wide)
    away = wide > np.abs(values)
    bits = narrow.view(np.uint32)
    np.subtract(bits, away, out=bits, casting="unsafe")
    np.bitwise_or(bits, inexact, out=bits, casting="unsafe")
    return narrow


def _f32_to_byte_bits(values: np.ndarray, out: np.ndarray, table: np.ndarray) -> None:
    """Round contiguous 1-D float32 ``values`` into an 8-bit float's patterns ``out`` (uint8) by ``table``,
    ml_dtypes' result for each float32 whose lower 16 bits are zero (``_narrow_table``).

    The 8-bit floats keep at most 3 of float32's 23 mantissa bits, so the half-way bit of any rounding is
    bit 19 or above (a subnormal result only drops more; bit 17 would still do): the lower 16 bits can only
    tell an exact tie from a value a hair above it (and, in e8m0, which has no zero, a zero from the smallest
    subnormals). ORed into bit 16 as one sticky bit, the upper half rounds exactly as the whole float32 does,
    which the table then gives: infinities, NaNs (any payload stays a NaN), saturation and subnormals as
    ml_dtypes has them. Four integer passes and a gather instead of ml_dtypes' element loop."""
    bits = values.view(np.uint32)
    # (low 16 bits) + 0xFFFF reaches bit 16 exactly when they are not all zero, and never bit 17.
    index = np.bitwise_and(bits, np.uint32(0xFFFF))
    np.add(index, np.uint32(0xFFFF), out=index)
    np.bitwise_or(index, bits, out=index)
    np.right_shift(index, np.uint32(16), out=index)
    np.take(table, index, out=out, mode="clip")  # every index is < 65536; "clip" skips take's buffered check


def _f64_to_byte_bits(values: np.ndarray, out: np.ndarray, table: np.ndarray) -> None:
    """Round contiguous 1-D float64 ``values`` into an 8-bit float's patterns ``out``, once (through float32
    rounded to odd, ``_f64_to_odd_f32``)."""
    _f32_to_byte_bits(_f64_to_odd_f32(values), out, table)


def _16_to_byte_bits(values: np.ndarray, out: np.ndarray, table: np.ndarray) -> None:
    """Contiguous 1-D bfloat16 or float16 ``values`` into an 8-bit float's patterns: a lookup by the pattern."""
    np.take(table, values.view(np.uint16), out=out, mode="clip")
