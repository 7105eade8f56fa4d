"""Kernels and their launch: ``nki.jit``, ``kernel[grid](...)``, simulate, baremetal, benchmark.

A launch converts the arguments to HBM tensors without copying (arguments.py), runs every instance of
the grid in order (LNC=2's two cores at the same time: Launch.run_cores), and hands back the returned
HBM tensors as the caller's kind.
Arguments written by the kernel are updated in place, so kernels in the outputs-passed-in style work too.

This module knows numpy arrays only. Other argument kinds, and launches that PyTorch traces rather than
runs, belong to an integration that registers itself here (nki/torch: CPU and neuron tensors, fake
tensors, torch.compile), so the core runs and is tested without torch.
"""
from __future__ import annotations

import contextlib
import functools
import math
import inspect
import time
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .. import _env
from ..trainium.targets import GENERATION_NAMES
from . import arguments, blas_threads, host_memory, runtime
from . import schedule as _schedule
from .cost_model import Costs
from .errors import NKIUnsupportedError, fail
from .indexing import iter_grid
from .memory import TARGETS, Target, default_target
from .rules import dependencies as _deps
from .rules import frontend as _frontend
from .runtime import Launch
from .tensor import NKITensor
from .typing import is_mutable


class LaunchClock:
    """Wall and process CPU seconds spent in every top-level launch of this process, summed: what a test
    harness subtracts from a test's time to tell the simulator's share from its own (the NKI Library
    runner's per-test "simulator" column). CPU time is the whole process's (every thread) during the
    launch, so a launch's two LNC=2 core threads both count."""

    def __init__(self) -> None:
        self.launches = 0
        self.wall_s = 0.0
        self.cpu_s = 0.0

    @contextlib.contextmanager
    def timing(self) -> Any:
        wall0, cpu0 = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.launches += 1
            self.wall_s += time.perf_counter() - wall0
            self.cpu_s += time.process_time() - cpu0

    def reading(self) -> "tuple[int, float, float]":
        """(launches, wall seconds, CPU seconds) so far; differences of two readings time what ran between."""
        return self.launches, self.wall_s, self.cpu_s


launch_clock = LaunchClock()


class LaunchResult:
    """What the last launch of a kernel did: instruction counts and the cost model's estimate."""

    def __init__(self, launch: Launch, wall_s: float, written_arguments: tuple = ()) -> None:
        self.kernel_name = launch.kernel_name
        # One flag per array argument, in argument order (lists flattened): did the kernel write it?
        self.written_arguments = written_arguments
        self.grid = launch.grid
        self.costs: Costs = launch.costs
        self.wall_time_s = wall_s

    @property
    def instructions(self) -> int:
        return self.costs.total_instructions

    @property
    def estimated_latency_us(self) -> float:
        return self.costs.estimated_latency_s * 1e6

    @property
    def schedule(self) -> Any:
        """When each instruction ran on the target (nki/schedule.py's KernelSchedule); its instructions
        are listed when the launch ran inside ``nki.schedule.recording()``."""
        return self.costs.schedule

    def __repr__(self) -> str:
        return (f"LaunchResult({self.kernel_name}, grid={self.grid}, instructions={self.instructions}, "
                f"estimated_latency_us={self.estimated_latency_us:.1f}, wall_time_s={self.wall_time_s:.4f})")


class Kernel:
    """A function decorated with ``@nki.jit``: call it, or index it with a grid first."""

    # A kernel is never a pytest test, whatever its name (AWS's SDK names one test_nl_broadcast): its
    # parameters are the kernel's inputs, not fixtures. (It carries __wrapped__, which pytest would follow.)
    __test__ = False

    def __init__(self, func: Callable, *, dialect: str, mode: str = "auto", **options: Any) -> None:
        if isinstance(func, Kernel):
            func = func.func
        functools.update_wrapper(self, func)
        self.func, self.dialect, self.mode, self.options = func, dialect, mode, options
        target = options.get("platform_target")
        self.target: Optional[Target] = TARGETS[GENERATION_NAMES.get(target, target)] if target else None
        self.last_result: Optional[LaunchResult] = None
        self.last_rank_results: list = []  # launch_ranks: one LaunchResult per rank

    def __getitem__(self, grid: Any) -> "GridKernel":
        return GridKernel(self, _normalize_grid(grid, self.dialect))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _trace_handler is not None and _trace_handler.is_traced():
            return _trace_handler.launch(self, (), args, kwargs)
        return launch(self, (), args, kwargs)

    def __repr__(self) -> str:
        return f"<NKI kernel {self.__name__} ({self.dialect} dialect)>"


class GridKernel:
    """``kernel[grid]``: a kernel bound to an SPMD grid (legacy) or an LNC degree (new)."""

    def __init__(self, kernel: Kernel, grid: tuple) -> None:
        self.kernel, self.grid = kernel, grid

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _trace_handler is not None and _trace_handler.is_traced():
            return _trace_handler.launch(self.kernel, self.grid, args, kwargs)
        return launch(self.kernel, self.grid, args, kwargs)

    def __repr__(self) -> str:
        return f"<NKI kernel {self.kernel.__name__}{list(self.grid)}>"


class TraceHandler:
    """What an integration registers for launches it traces instead of running: ``is_traced()`` says
    whether this call is one, ``launch(kernel, grid, args, kwargs)`` performs it."""

    def __init__(self, is_traced: Callable[[], bool], launch: Callable[[Any, tuple, tuple, dict], Any]) -> None:
        self.is_traced, self.launch = is_traced, launch


_trace_handler: Optional[TraceHandler] = None


def set_trace_handler(handler: Optional[TraceHandler]) -> None:
    """Install (or, with None, remove) the integration that launches kernels under tracing."""
    global _trace_handler
    _trace_handler = handler


def _normalize_grid(grid: Any, dialect: str) -> tuple:
    grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    out = []
    for g in grid:
        n = int(g)  # nl.nc(2) * 4, nl.spmd_dim(...) are plain sizes here
        if n < 1:
            raise ValueError(f"launch grid dimensions must be positive, got {grid}")
        out.append(n)
    if dialect == "new" and (len(out) != 1 or out[0] not in (1, 2)):
        raise ValueError(
            f"in NKI 0.2+, kernel[n] sets the logical NeuronCore degree and n must be 1 or 2, got {list(out)}; "
            f"an SPMD grid of any shape is a legacy-dialect (neuronxcc.nki) feature")
    return tuple(out)


normalize_grid = _normalize_grid


def as_kernel(kernel: Any, dialect: str) -> "tuple[Kernel, tuple]":
    if isinstance(kernel, GridKernel):
        return kernel.kernel, kernel.grid
    if isinstance(kernel, Kernel):
        return kernel, ()
    if callable(kernel):
        return Kernel(kernel, dialect=dialect), ()
    raise TypeError(f"expected an NKI kernel (a function or @nki.jit object), got {type(kernel).__name__}")


# ---------------------------------------------------------------------------------------------------------
# launch
# ---------------------------------------------------------------------------------------------------------

def launch(kernel: Kernel, grid: tuple, args: tuple, kwargs: dict) -> Any:
    current = runtime.current_or_none()
    if current is not None:
        # A kernel called from inside a kernel runs inline, in the caller's launch.
        if grid:
            fail("err_nested_kernel_with_spmd_grid",
                 "a kernel with an SPMD grid cannot be launched from inside another kernel")
        return kernel.func(*args, **kwargs)
    host_memory.keep_freed_memory()
    with launch_clock.timing():
        return _launch(kernel, grid, args, kwargs)


def _launch(kernel: Kernel, grid: tuple, args: tuple, kwargs: dict) -> Any:
    _check_precise_fp()
    conv = arguments.make()
    cargs = tuple(conv.convert(a) for a in args)
    ckwargs = {k: conv.convert(v) for k, v in kwargs.items()}
    target = kernel.target or default_target()
    # The launch's costs decide when they are made whether they keep every instruction's record.
    with _schedule.recording() if conv.keeps_instructions() else contextlib.nullcontext():
        state = Launch(kernel.__name__, kernel.func, grid, kernel.dialect, target, conv.hbm_allocator())
    bound = _bind(kernel.func, cargs, ckwargs)
    checked = _frontend.begin(kernel.func, kernel.dialect, bound.arguments)  # the front end's rules
    if conv.requires_grad:
        conv.check_autograd(kernel)
    result = None
    with conv.launch_scope(kernel) as scope:
        t0 = time.perf_counter()
        with runtime.active(state), np.errstate(all="ignore"), blas_threads.single_threaded():
            if state.concurrent():
                result = state.run_cores(kernel.func, cargs, ckwargs)
            for index, pid in enumerate(() if state.concurrent() else
                                        _deps.grid_instances(iter_grid(grid), math.prod(grid), kernel.dialect)):
                state.begin_instance(tuple(int(p) for p in pid), index)
                try:
                    value = kernel.func(*cargs, **ckwargs)
                finally:
                    state.close_products()
                state.check_live_ranges()
                if index == 0:
                    result = value
            out = conv.result(result, state)
        wall = time.perf_counter() - t0
        kernel.last_result = LaunchResult(state, wall, tuple(s.written for s in conv.storages))
        _check_mutable(kernel.func, bound, result)
        _frontend.end(checked, result)
        scope.finish(state.costs)
    return out


def launch_ranks(kernel: Any, inputs: Sequence[Any]) -> list:
    """Run ``kernel`` (``@nki.jit`` function, or ``kernel[lnc]``) on ``len(inputs)`` ranks at the same time,
    as the Neuron runtime runs one worker per rank (logical core): ``inputs[r]`` is rank r's arguments, a
    dict of keyword arguments or a tuple of positional ones. ``nki.collectives`` meet between the ranks.
    Each rank's results, in rank order; ``kernel.last_rank_results`` holds each rank's LaunchResult."""
    kernel, grid = as_kernel(kernel, "new")
    if kernel.dialect != "new":
        raise ValueError("launch_ranks runs NKI 0.2+ kernels (nki.jit); legacy SPMD grids have no ranks")
    if not inputs:
        raise ValueError("launch_ranks needs one set of arguments per rank, got none")
    if runtime.current_or_none() is not None:
        fail("err_nested_kernel_with_spmd_grid", "launch_ranks cannot be called from inside a kernel")
    if _trace_handler is not None and _trace_handler.is_traced():
        raise NKIUnsupportedError("launch_ranks under tracing (torch.compile, fake tensors) is not supported; "
                                  "call it eagerly")
    host_memory.keep_freed_memory()
    with launch_clock.timing():
        return _launch_ranks(kernel, grid, inputs)


def _launch_ranks(kernel: Kernel, grid: tuple, inputs: Sequence[Any]) -> list:
    target = kernel.target or default_target()
    convs, calls, states, bounds = [], [], [], []
    for rank_input in inputs:
        args, kwargs = (tuple(rank_input), {}) if isinstance(rank_input, (tuple, list)) else ((), dict(rank_input))
        conv = arguments.make()
        cargs, ckwargs = tuple(conv.convert(a) for a in args), {k: conv.convert(v) for k, v in kwargs.items()}
        if conv.requires_grad:
            conv.check_autograd(kernel)
        convs.append(conv)
        calls.append((cargs, ckwargs))
        bounds.append(_bind(kernel.func, cargs, ckwargs))
        states.append(Launch(kernel.__name__, kernel.func, grid, kernel.dialect, target, conv.hbm_allocator()))
    with contextlib.ExitStack() as stack:
        scopes = [stack.enter_context(conv.launch_scope(kernel)) for conv in convs]
        t0 = time.perf_counter()
        with np.errstate(all="ignore"), blas_threads.single_threaded():
            results = runtime.run_ranks(states, calls, kernel.func)
            outs = [conv.result(res, st) for conv, res, st in zip(convs, results, states)]
        wall = time.perf_counter() - t0
        kernel.last_rank_results = [LaunchResult(st, wall, tuple(s.written for s in conv.storages))
                                    for st, conv in zip(states, convs)]
        kernel.last_result = kernel.last_rank_results[0]
        for bound, res, scope, st in zip(bounds, results, scopes, states):
            _check_mutable(kernel.func, bound, res)
            scope.finish(st.costs)
    return outs


PRECISE_FP_ENV = "NKI_PRECISE_FP"


def _check_precise_fp() -> None:
    """AWS's simulator stores bfloat16 and fp8 tensors in their own dtypes by default (NKI_PRECISE_FP=1) and
    in float32 with NKI_PRECISE_FP=0. This simulator always stores every dtype as itself (the precise mode),
    so the float32 mode is refused by name rather than silently ignored. Read per launch, as AWS reads it."""
    if not _env.flag(PRECISE_FP_ENV, default=True):
        raise NKIUnsupportedError(
            f"{PRECISE_FP_ENV}=0 (low-precision tensors held as float32) is not modelled: the simulator always "
            f"stores bfloat16 and fp8 tensors in their own dtypes, which is {PRECISE_FP_ENV}=1 (the default); "
            f"unset {PRECISE_FP_ENV} or set it to 1")


def _bind(func: Callable, args: tuple, kwargs: dict) -> inspect.BoundArguments:
    try:
        return inspect.signature(func).bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"NKI kernel {func.__name__}: {e}") from None


def _check_mutable(func: Callable, bound: inspect.BoundArguments, result: Any) -> None:
    """A parameter annotated nt.mutable_tensor that the kernel writes must be among its results."""
    annotations = getattr(func, "__annotations__", {})
    if not any(is_mutable(a) for a in annotations.values()):
        return
    returned = set()
    stack = [result]
    while stack:
        v = stack.pop()
        if isinstance(v, NKITensor):
            returned.add(id(v.storage))
        elif isinstance(v, (tuple, list)):
            stack.extend(v)
    for name, value in bound.arguments.items():
        if (is_mutable(annotations.get(name)) and isinstance(value, NKITensor) and value.storage.written
                and id(value.storage) not in returned):
            fail("err_mutable_parameter_not_returned",
                 f"parameter '{name}' is annotated nt.mutable_tensor and written by the kernel, so the kernel "
                 f"must return it")
