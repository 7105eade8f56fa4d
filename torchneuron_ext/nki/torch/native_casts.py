"""float32 <-> bfloat16 of whole tiles, and 8-bit floats through their tables, by the extension's native loops
(csrc/nki/float_conversions.cpp), registered with the core's float_bits, which stays numpy-only and keeps its
own numpy passes for layouts these do not take."""
from __future__ import annotations

from typing import Optional

import numpy as np

from .. import float_bits
from ..data_address import data_address

try:
    from ... import _C
except ImportError:  # the package without its extension built: float_bits keeps numpy's passes
    _C = None


def _rows(arr: np.ndarray) -> Optional[tuple]:
    """``arr`` as (rows, cols, ld): its last axis's rows of ``cols`` contiguous elements, ``ld`` elements apart,
    or None."""
    cols = arr.shape[-1]
    if cols > 1 and arr.strides[-1] != arr.itemsize:
        return None
    try:
        rows = arr.reshape((-1, cols), copy=False)
    except (ValueError, TypeError):  # a copy would be needed (TypeError: numpy before 2.1)
        return None
    ld, rem = divmod(rows.strides[0], arr.itemsize)
    if rem or ld < cols:
        return None
    return rows.shape[0], cols, ld


def _convert(native, src: np.ndarray, dst: np.ndarray) -> bool:
    """``native`` over ``src`` into ``dst`` of the same shape: one row when both are contiguous, else the rows
    of their last axis; False where either is not rows of contiguous elements."""
    if src.shape != dst.shape or src.size == 0:
        return src.shape == dst.shape
    if src.flags.c_contiguous and dst.flags.c_contiguous:
        n = src.size
        native(data_address(src), n, data_address(dst), n, 1, n)
        return True
    a, b = _rows(src), _rows(dst)
    if a is None or b is None:
        return False
    native(data_address(src), a[2], data_address(dst), b[2], a[0], a[1])
    return True


def narrow(values: np.ndarray, out: np.ndarray) -> bool:
    """float32 ``values`` -> ml_dtypes' bfloat16 bit patterns in the uint16 ``out``, or False."""
    return values.dtype == np.float32 and out.dtype == np.uint16 and _convert(_C._nki_bf16_narrow, values, out)


def widen(values: np.ndarray, out: np.ndarray) -> bool:
    """bfloat16 ``values`` -> float32 ``out``, exactly, or False."""
    return (values.dtype == float_bits._BF16 and out.dtype == np.float32 and out.flags.writeable
            and _convert(_C._nki_bf16_widen, values, out))


def byte_lookup(table: np.ndarray, values: np.ndarray, out: np.ndarray) -> bool:
    """``out[...] = table[values' bytes]`` for a 256-entry table of 2- or 4-byte results, or False."""
    if table.shape != (256,) or not table.flags.c_contiguous or table.itemsize not in (2, 4) \
            or values.itemsize != 1 or out.dtype != table.dtype or not out.flags.writeable:
        return False
    return _convert(lambda src, src_ld, dst, dst_ld, rows, cols: _C._nki_byte_lookup(
        data_address(table), table.itemsize, src, src_ld, dst, dst_ld, rows, cols), values, out)


if _C is not None and hasattr(_C, "_nki_byte_lookup"):
    float_bits.register_bfloat16_conversions(narrow, widen)
    float_bits.register_byte_lookup(byte_lookup)
