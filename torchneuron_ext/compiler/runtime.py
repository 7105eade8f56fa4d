"""What compiled code calls at run time: timing and tracing of generated kernels and graphs."""
from __future__ import annotations

from typing import Any, Callable

from .. import _C

_timing_mode = _C._timing_mode
_now_ns = _C._now_ns
_record = _C._record_kernel


def run_kernel(name: str, kernel: Callable[..., Any], *args: Any) -> Any:
    """Call a generated kernel; while timing or tracing is on, record it as a device kernel."""
    if not _timing_mode():
        return kernel(*args)
    start = _now_ns()
    out = kernel(*args)
    _record(f"compiled::{name}", "compiled", _C._current_device(), start, _now_ns(), 0, 0, 0)
    return out
