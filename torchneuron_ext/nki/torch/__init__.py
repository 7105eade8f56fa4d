"""NKI's PyTorch integration: kernels on torch tensors, as operators, and as routes for ATen operators.

Importing this package registers it with the numpy-only core: torch dtypes are accepted where NKI
dtypes are (dtypes.py), torch tensors become kernel arguments (arguments.py, launch.py), and a launch that
torch.compile or a tracing mode sees becomes an operator call (tracing.py, ops.py). ``torchneuron_ext.nki`` imports it when torch is importable. The operator
machinery (``nki_op``, ``wrap_nki``) and ``route_aten`` load on first use: they define custom operators,
which eager-only users need not pay for.

- interop.py: zero-copy views between torch tensors and numpy arrays, dtype maps.
- float16.py: float32 <-> float16 conversions through the CPU's F16C, for the core's float_bits.
- native_casts.py: float32 <-> bfloat16 and 8-bit float lookups through the extension's native loops, for the
  same.
- launch.py: the torch kind of kernel arguments and the launch's profiler and device-activity records.
- tracing.py: the one "under tracing?" predicate and the one code digest.
- ops.py: ``nki_op``, ``wrap_nki``, and the operators a traced launch becomes.
- aten_routing.py: ``route_aten``.
"""
from __future__ import annotations

import importlib
from typing import Any

from .. import arguments as _arguments
from .. import dtypes as _dtypes
from .. import kernel as _kernel
from . import native_casts as _native_casts  # noqa: F401  (registers the bfloat16 and 8-bit float casts)
from . import float16 as _float16  # noqa: F401  (registers the float16 conversions)
from . import interop as _interop
from . import launch as _launch
from . import tracing as _tracing



def _traced_launch(kernel: Any, grid: tuple, args: tuple, kwargs: dict) -> Any:
    # ops.py defines the torchneuron_ext_nki operators: loaded when a traced launch first needs them.
    from .ops import traced_launch
    return traced_launch(kernel, grid, args, kwargs)


_dtypes.register_foreign_dtypes("torch", _interop.torch_to_numpy_dtype)
_arguments.set_arguments(_launch.TorchArguments)
_kernel.set_trace_handler(_kernel.TraceHandler(_tracing.kernel_traced, _traced_launch))

_LAZY = {"nki_op": "ops", "wrap_nki": "ops", "NKIKernelCaller": "ops", "clear_plan_cache": "ops",
         "route_aten": "aten_routing", "routes": "aten_routing", "AtenRoute": "aten_routing"}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
