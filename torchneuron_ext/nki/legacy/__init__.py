"""The legacy NKI dialect (``neuronxcc.nki``, SDK up to 2.27) on the same interpreter as ``nki``."""
from __future__ import annotations

from . import isa, language, typing  # noqa: F401
from ..entry_points import (make_baremetal, make_benchmark, make_jit, make_profile, make_simulate,
                            make_simulate_kernel)
from ..errors import NKIError, NKIUnsupportedError  # noqa: F401
from ..kernel import Kernel  # noqa: F401
from ..tensor import NKITensor  # noqa: F401

jit = make_jit("legacy")
simulate_kernel = make_simulate_kernel("legacy")
simulate = make_simulate("legacy")
baremetal = make_baremetal("legacy")
benchmark = make_benchmark("legacy")
profile = make_profile("legacy")
tensor = NKITensor
