"""NKI, the Neuron Kernel Interface, on the emulated neuron device.

``torchneuron_ext.nki`` is the new dialect (NKI 0.2+, ``import nki``): ``nki.language``, ``nki.isa``
with destination-first instructions, ``kernel[lnc]``, ``nki.simulate``. ``torchneuron_ext.nki.legacy``
is the legacy dialect (``neuronxcc.nki``): functional ``nl``/``nisa`` with arange, mgrid and masks,
SPMD grids, ``nki.simulate_kernel``. Both run on one interpreter (engines/) that enforces the
hardware's rules and raises :class:`NKIError` with the toolchain's error codes. That core needs numpy
only; its PyTorch integration (``nki.torch``: kernels on tensors, ``nki_op``, ``route_aten``) registers
itself with it when torch is importable.
See docs/nki.md; ``torchneuron_ext.compat.aliases.install()`` makes ``import nki`` and
``import neuronxcc.nki`` resolve here.
"""
from __future__ import annotations

import importlib.util as _importlib_util

from . import builtin, compiler, isa, language, simulator, tensor, typing  # noqa: F401
from .entry_points import for_dialect
from .errors import NKIError, NKIUnsupportedError  # noqa: F401
from .kernel import GridKernel, Kernel, LaunchResult  # noqa: F401
from .kernel import launch_ranks  # noqa: F401  (several ranks at once, for nki.collectives)
from .language import dtypes as dtype  # noqa: F401
from .tensor import NKITensor  # noqa: F401

jit, simulate, simulate_kernel, baremetal, benchmark, profile = for_dialect("new")
# AWS's simulator harness calls it cpu_simulate (``nki.cpu_simulate(kernel)[lnc](**inputs)``).
cpu_simulate = simulate

# ``nki.tensor`` and ``nki.dtype`` are modules, as AWS's harness imports them (``import nki.dtype as nt``;
# ``nki.tensor`` holds the tensor class); kernels write ``dtype: nki.dtype`` only as an annotation.
__all__ = ["jit", "simulate", "cpu_simulate", "simulate_kernel", "baremetal", "benchmark", "profile", "language",
           "isa", "typing", "compiler", "simulator", "builtin", "dtype", "tensor", "NKIError",
           "NKIUnsupportedError", "Kernel", "NKITensor"]

# The package face is the one place the core meets its torch integration: it registers itself with the
# core on import, and the core runs and is tested with numpy alone when torch cannot be imported.
if _importlib_util.find_spec("torch") is not None:
    from . import torch as _torch_integration  # noqa: F401,E402
