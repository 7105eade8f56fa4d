"""How the current dialect's test kernels bring arguments on chip and results back, as AWS's kernels do."""
from __future__ import annotations

from typing import Any

import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl


def load(a: Any) -> Any:
    """An SBUF copy of a kernel argument (HBM, partition dimension first)."""
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    return t


def store(t: Any) -> Any:
    """A new shared-HBM tensor holding ``t``, for the kernel to return."""
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out
