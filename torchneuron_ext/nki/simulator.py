"""``nki.simulator``: the simulator's function-style entry point, ``simulate_kernel(func, args, kwargs, lnc)``.

This is the call AWS's integrations make (vllm-neuron's CPU mode runs every NKI kernel through
``nki.simulator.simulate_kernel(func, args, kwargs, lnc)``); ``nki.simulate(kernel)[lnc](...)`` is the same
launch written as AWS's decorator-style API.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

from .kernel import GridKernel, as_kernel, normalize_grid

__all__ = ["simulate_kernel"]


def simulate_kernel(kernel: Callable, args: Sequence[Any] = (), kwargs: Optional[Mapping[str, Any]] = None,
                    lnc: int = 1) -> Any:
    """Run ``kernel`` (a function or ``@nki.jit`` kernel) in the simulator at LNC degree ``lnc`` with the
    positional ``args`` and keyword ``kwargs``; results come back as the arguments' kind (numpy gives numpy)."""
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise TypeError(f"nki.simulator.simulate_kernel takes the positional arguments as a sequence, got "
                        f"{type(args).__name__}")
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise TypeError(f"nki.simulator.simulate_kernel takes the keyword arguments as a mapping, got "
                        f"{type(kwargs).__name__}")
    k, grid = as_kernel(kernel, "new")
    if grid and int(lnc) != 1:
        raise ValueError(f"nki.simulator.simulate_kernel: the kernel is already bound to LNC={grid[0]}; "
                         f"pass the kernel itself with lnc={lnc}")
    return GridKernel(k, grid or normalize_grid(lnc, "new"))(*args, **dict(kwargs or {}))
