"""TORCHNEURON_EXT_NUMERICS: whose arithmetic the device's kernels do (csrc/aten/numerics.h).

`host` (the default): the host CPU's. `trainium`: TorchNeuron's on Trainium, which has no 64-bit
arithmetic: float64 is computed in float32 and int64 in int32 while results keep their 64-bit dtype
(copies and casts keep all 64 bits), and fresh device memory holds NaN (floating types) or 0xA5
bytes (integers) instead of zeros or stale data. Read once, when the library loads.
"""
from __future__ import annotations

from .. import _C

MODES = ("host", "trainium")


def mode() -> str:
    """The numerics mode of this process; ValueError naming the valid values for a bad setting."""
    return str(_C._numerics_mode())
