"""``nki.compiler.frontend``: the toolchain's Python front ends (``ParserFrontend``, ``TracerFrontend``), which
turn a kernel into MLIR, as far as a simulator can provide them honestly.

AWS's NKI Library harness imports them for its compile modes and for tests marked ``trace_only``: it calls
``frontend.compile(kernel, inputs=, target=, lnc=, artifacts_dir=, dump_python_ast=, output_names=)`` and
reads ``result.module`` (the MLIR) only to write it out when debugging. Here ``compile`` checks the kernel by
running it once in the simulator on those inputs, at that target and LNC degree, so a kernel the simulator
rejects (shapes, the compiler's rules, NKIUnsupportedError) is rejected here. It produces no MLIR:
``result.module`` refuses by name. AWS's two front ends differ in how they read the kernel (its source or
its execution); the simulator only executes, so both behave alike.
"""
from __future__ import annotations

import ast
import inspect
import os
import textwrap
from typing import Any, Callable, Mapping, Optional, Sequence

from .entry_points import SimulatedKernel
from .errors import NKIUnsupportedError
from .kernel import GENERATION_NAMES, Kernel
from .memory import TARGETS

__all__ = ["NKIFrontend", "ParserFrontend", "TracerFrontend", "FrontendResult"]


class FrontendResult:
    """What ``compile`` returns: the kernel's outputs of the checking run; no MLIR module."""

    def __init__(self, kernel_name: str, target: str, lnc: int, outputs: list) -> None:
        self.kernel_name, self.target, self.lnc, self.outputs = kernel_name, target, lnc, outputs

    @property
    def module(self) -> Any:
        raise NKIUnsupportedError(
            f"nki.compiler.frontend: no MLIR module for {self.kernel_name}: the torchneuron_ext NKI simulator "
            f"runs kernels instead of lowering them, so it has no MLIR to print or compile to a NEFF")

    def __repr__(self) -> str:
        return f"FrontendResult({self.kernel_name}, target={self.target}, lnc={self.lnc}, outputs={len(self.outputs)})"


def _python_function(kernel: Any) -> Callable:
    """The Python function of an ``@nki.jit`` kernel, of one bound to a grid, or the function itself."""
    if isinstance(kernel, Kernel):
        return kernel.func
    if isinstance(getattr(kernel, "kernel", None), Kernel):
        return kernel.kernel.func
    if not callable(kernel):
        raise TypeError(f"nki.compiler.frontend: compile takes a kernel function, got {type(kernel).__name__}")
    return kernel


class NKIFrontend:
    """A front end: ``compile`` a kernel for a target and an LNC degree."""

    def compile(self, kernel: Any, inputs: Optional[Mapping[str, Any]] = None, *, target: str, lnc: int = 1,
                artifacts_dir: Optional[str] = None, dump_python_ast: bool = False,
                output_names: Optional[Sequence[str]] = None) -> FrontendResult:
        func = _python_function(kernel)
        name = getattr(func, "__name__", repr(func))
        target_name = GENERATION_NAMES.get(str(target), str(target))
        if target_name not in TARGETS:
            raise ValueError(f"nki.compiler.frontend: unknown target {target!r} (known: {', '.join(TARGETS)})")
        if isinstance(lnc, bool) or not isinstance(lnc, int) or lnc < 1:
            raise ValueError(f"nki.compiler.frontend: lnc must be a positive integer, got {lnc!r}")
        if artifacts_dir is not None:
            os.makedirs(artifacts_dir, exist_ok=True)
        if dump_python_ast:
            if artifacts_dir is None:
                raise ValueError("nki.compiler.frontend: dump_python_ast=True writes into artifacts_dir; give one")
            tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
            with open(os.path.join(artifacts_dir, f"{name}.python_ast.txt"), "w", encoding="utf-8") as f:
                f.write(ast.dump(tree, indent=2) + "\n")
        checked = Kernel(func, dialect="new", platform_target=target_name)
        result = SimulatedKernel(checked, ())[lnc](**dict(inputs or {}))
        outputs = [] if result is None else list(result) if isinstance(result, (list, tuple)) else [result]
        if output_names is not None and len(output_names) != len(outputs):
            raise ValueError(f"nki.compiler.frontend: {name} returns {len(outputs)} output(s), but "
                             f"{len(output_names)} output names were given: {list(output_names)}")
        return FrontendResult(name, target_name, lnc, outputs)


class ParserFrontend(NKIFrontend):
    """AWS's front end that parses the kernel's source; here, like every front end, a checking run."""


class TracerFrontend(NKIFrontend):
    """AWS's front end that traces the kernel's execution; here, like every front end, a checking run."""
