"""Keep the memory a launch frees for its next tiles (glibc's malloc).

A kernel allocates a new numpy array for nearly every tile it makes, and most are larger than the size above
which glibc maps fresh pages for an allocation (128 KiB, raised as such blocks are freed) or returns the top
of a thread's heap to the system once it is free. Each fresh page then costs a page fault when the tile is
filled: on the development VM about 3 s of system time in a 30 s launch of AWS's MoE shard-on-H kernel (a
(128, 3584) bf16 tile is 224 pages). The first launch therefore sets glibc's two thresholds where its own
adjustment would end up anyway (32 MiB for mapping, 64 MiB for giving back), once, for the process: freed
tiles are reused from the heap without faults (that launch: 3.1 -> 1.1 s of system time, 31 -> 29 s).

Left alone when the user set either threshold (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_`` or
``GLIBC_TUNABLES``), with ``TORCHNEURON_EXT_NKI_MALLOC_TUNING=0``, and away from glibc.
"""
from __future__ import annotations

import os
import platform

ENV = "TORCHNEURON_EXT_NKI_MALLOC_TUNING"
_M_TRIM_THRESHOLD = -1   # glibc's malloc.h
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: where its adjustment stops
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # what glibc sets beside a raised mmap threshold

_tuned = None  # None: not tried yet; then whether the thresholds were set


def keep_freed_memory() -> bool:
    """Set glibc's thresholds once per process (see the module's docstring); whether they are set."""
    global _tuned
    if _tuned is None:
        _tuned = _tune()
    return _tuned


def _tune() -> bool:
    if os.environ.get(ENV, "1") == "0":
        return False
    if any(name in os.environ for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")) or \
            "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        import ctypes
        mallopt = ctypes.CDLL(None).mallopt
    except (ImportError, OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
