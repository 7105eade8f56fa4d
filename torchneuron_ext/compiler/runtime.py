"""What compiled code calls at run time: timing and tracing of generated kernels and graphs."""
from __future__ import annotations

from typing import Any, Callable

import torch

from .. import _C
from ..instrumentation.activity import DeviceActivity

_timing_mode = _C._timing_mode
_Tensor = torch.Tensor
# c10::ScalarType numbers of the dtypes the cost model distinguishes (others: unknown).
_SCALAR_TYPE = {torch.uint8: 0, torch.int8: 1, torch.int16: 2, torch.int32: 3, torch.int64: 4, torch.float16: 5,
                torch.float32: 6, torch.float64: 7, torch.bool: 11, torch.bfloat16: 15}


def run_kernel(name: str, kernel: Callable[..., Any], *args: Any) -> Any:
    """Call a generated kernel whose arguments' access is unknown (code generated before it was
    kept, e.g. from Inductor's cache: torch.compile's default backend does not salt its key):
    every tensor argument is counted once, as read."""
    return run_kernel_rw(name, kernel, "", *args)


def run_kernel_rw(name: str, kernel: Callable[..., Any], access: Any, *args: Any) -> Any:
    """Call a generated kernel; while timing or tracing is on, record it as a device kernel with
    the bytes it reads and writes, its largest element count and dtype (what the cost model
    projects from).

    `access` has one letter per argument, from Inductor's parameter names (wrapper_codegen.
    kernel_access): r read, w written, b both (in place), - not a buffer. Empty when unknown:
    every tensor argument is then counted once, as read. It may come with the bytes Inductor's
    scheduler counts the kernel reading and writing of each argument (compiler.kernel_bytes), as
    `(letters, bytes read per argument, bytes written per argument)`: a table read through an
    indirect index is charged the rows it gathers. None there (or no counts) is the whole argument;
    a count is bounded by the argument's size.
    """
    if not _timing_mode():
        return kernel(*args)
    counted_read = counted_written = None
    if isinstance(access, tuple):
        access, counted_read, counted_written = access
    with DeviceActivity(f"compiled::{name}", "compiled", _C._current_device()) as act:
        out = kernel(*args)
        act.stop()
        read, written, elements, dtype = 0, 0, 0, -1
        for i, a in enumerate(args):
            if isinstance(a, _Tensor):
                n = a.numel()
                size = a.element_size()
                nbytes = n * size
                how = access[i] if access else "r"
                r = w = nbytes
                if counted_read is not None and counted_read[i] is not None:
                    r, w = min(counted_read[i], nbytes), min(counted_written[i], nbytes)
                    # The elements the kernel touches of this argument, not its size.
                    n = max(r, w) // size
                if how in "rb":
                    read += r
                if how in "wb":
                    written += w
                if n > elements:
                    elements = n
                if dtype < 0:
                    dtype = _SCALAR_TYPE.get(a.dtype, -1)
        act.bytes_read, act.bytes_written, act.elements, act.dtype = read, written, elements, dtype
    return out
