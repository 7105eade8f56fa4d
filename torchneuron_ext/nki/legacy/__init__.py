"""The legacy NKI dialect (``neuronxcc.nki``, SDK up to 2.27) on the same interpreter as ``nki``."""
from __future__ import annotations

from . import isa, language, typing  # noqa: F401
from .. import compiler  # noqa: F401  (neuronxcc.nki.compiler: one module for both dialects)
from ..entry_points import for_dialect, make_trace
from ..errors import NKIError, NKIUnsupportedError  # noqa: F401
from ..kernel import Kernel  # noqa: F401
from ..tensor import NKITensor  # noqa: F401

jit, simulate, simulate_kernel, baremetal, benchmark, profile = for_dialect("legacy")
trace = make_trace("legacy")
tensor = NKITensor
