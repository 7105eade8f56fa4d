"""float32 <-> float16 through torch's conversions, which use the CPU's F16C (numpy converts one element at a
time): registered with the core's float_bits, which stays numpy-only."""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from .. import float_bits


def _takes(values: np.ndarray, itemsize: int) -> bool:
    # torch.from_numpy wants writeable arrays with non-negative strides in whole elements.
    return values.flags.writeable and all(st >= 0 and st % itemsize == 0 for st in values.strides)


def narrow(values: np.ndarray) -> Optional[np.ndarray]:
    """float32 -> float16 with numpy's bits, or None. Rounding (to nearest even, overflow to infinity,
    subnormals) is IEEE's in both; F16C quiets a signalling NaN that numpy keeps, so an array holding a NaN is
    left to numpy (tests/nki/test_float_bits.py)."""
    if not _takes(values, 4):
        return None
    out = np.empty(values.shape, np.float16)
    narrowed = torch.from_numpy(out)
    narrowed.copy_(torch.from_numpy(values))
    if bool(narrowed.isnan().any()):
        return None
    return out


def widen(values: np.ndarray, out: Optional[np.ndarray] = None) -> Optional[np.ndarray]:
    """float16 -> float32 into ``out`` (or a new array), or None. A signalling NaN comes out quiet: for matmul
    operands only (engines/operands._widen)."""
    if not _takes(values, 2):
        return None
    if out is None:
        out = np.empty(values.shape, np.float32)
    torch.from_numpy(out).copy_(torch.from_numpy(values))
    return out


float_bits.register_float16_conversions(narrow, widen)
