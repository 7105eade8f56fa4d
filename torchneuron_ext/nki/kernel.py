"""Kernels and their launch: ``nki.jit``, ``kernel[grid](...)``, simulate, baremetal, benchmark.

A launch converts the arguments to HBM tensors without copying (numpy arrays are used as they are),
runs every instance of the grid in order, and hands back the returned HBM tensors as the caller's kind.
Arguments written by the kernel are updated in place, so kernels in the outputs-passed-in style work too.

This module knows numpy arrays only. Other argument kinds, and launches that PyTorch traces rather than
runs, belong to an integration that registers itself here (nki/torch: CPU and neuron tensors, fake
tensors, torch.compile), so the core runs and is tested without torch.
"""
from __future__ import annotations

import functools
import inspect
import time
from typing import Any, Callable, Optional

import numpy as np

from . import blas_threads, dtypes, runtime
from .cost_model import Costs
from .errors import fail
from .indexing import iter_grid
from .memory import TARGETS, Target, default_target, shared_hbm
from .runtime import Launch, Storage
from .tensor import NKITensor
from .typing import _TensorType, is_mutable

_input_buffer = shared_hbm  # kernel arguments live in device HBM, visible to every instance


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

    def __repr__(self) -> str:
        return (f"LaunchResult({self.kernel_name}, grid={self.grid}, instructions={self.instructions}, "
                f"estimated_latency_us={self.estimated_latency_us:.1f}, wall_time_s={self.wall_time_s:.4f})")


class Kernel:
    """A function decorated with ``@nki.jit``: call it, or index it with a grid first."""

    def __init__(self, func: Callable, *, dialect: str, mode: str = "auto", **options: Any) -> None:
        if isinstance(func, Kernel):
            func = func.func
        functools.update_wrapper(self, func)
        self.func, self.dialect, self.mode, self.options = func, dialect, mode, options
        target = options.get("platform_target")
        self.target: Optional[Target] = TARGETS[target] if target else None
        self.last_result: Optional[LaunchResult] = None

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

class _NoScope:
    """The launch scope of arguments no integration records: nothing to open, nothing to report."""

    def __enter__(self) -> "_NoScope":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def finish(self, costs: Costs) -> None:
        return None


class Arguments:
    """Kernel arguments converted to HBM tensors, and how to give results back to the caller.

    Numpy arrays (and ``nt.tensor[...]`` placeholders) are handled here; an integration subclasses this
    for its own argument kinds and registers the subclass with :func:`set_arguments`."""

    def __init__(self) -> None:
        self.kind = "numpy"
        self.device: Any = None
        self.originals: dict[int, Any] = {}  # id(storage) -> caller's object
        self.storages: list[Storage] = []
        self.requires_grad = False

    def convert(self, value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return self._wrap(value, value)
        converted = self.convert_foreign(value)
        if converted is not value:
            return converted
        if isinstance(value, (list, tuple)) and any(self.is_array(v) for v in value):
            return type(value)(self.convert(v) for v in value)
        if isinstance(value, _TensorType):
            return self._placeholder(value)
        return value

    def convert_foreign(self, value: Any) -> Any:
        """An argument of the integration's kind as an HBM tensor; anything else unchanged."""
        return value

    def is_array(self, value: Any) -> bool:
        """Whether ``value`` is an array argument (a list holding one is a list of tensors)."""
        return isinstance(value, np.ndarray)

    def _placeholder(self, spec: Any) -> NKITensor:
        """``nt.tensor[[shape], dtype]`` as an argument (the tutorials benchmark with these instead of
        arrays): the toolchain compiles for that shape and runs on random inputs, so do we."""
        if spec.shape is None or spec.dtype is None:
            raise TypeError(f"a kernel argument given as {spec!r} needs a shape and a dtype, e.g. "
                            f"nt.tensor[[128, 512], nl.float32]")
        dtype = dtypes.as_dtype(spec.dtype)
        shape = tuple(int(d) for d in (spec.shape if isinstance(spec.shape, (tuple, list)) else (spec.shape,)))
        values = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
        return self._wrap(dtypes.cast(values, dtype), spec)

    def _wrap(self, array: np.ndarray, original: Any) -> NKITensor:
        storage = Storage(array, _input_buffer, "", 0, original)
        self.originals[id(storage)] = original
        self.storages.append(storage)
        return NKITensor(storage, array)

    def hbm_allocator(self) -> runtime.HbmAllocator:
        return runtime.numpy_hbm

    def check_autograd(self, kernel: Kernel) -> None:
        """Before the launch: arguments that track gradients lose them through a kernel (integration's)."""
        return None

    def launch_scope(self, kernel: Kernel) -> Any:
        """A context manager around the launch with ``finish(costs)``: the integration records it there."""
        return _NoScope()

    def result(self, value: Any, launch: Launch) -> Any:
        if isinstance(value, NKITensor):
            return self._result_tensor(value, launch)
        if isinstance(value, (tuple, list)):
            return type(value)(self.result(v, launch) for v in value)
        if isinstance(value, dict):
            return {k: self.result(v, launch) for k, v in value.items()}
        return value

    def _result_tensor(self, t: NKITensor, launch: Launch) -> Any:
        storage = t.storage
        if storage.buffer.on_chip:
            fail("err_unsupported_memory",
                 f"a kernel returns HBM tensors, but this one is in {storage.buffer.name}: allocate the output "
                 f"with nl.ndarray(shape, dtype, buffer=nl.shared_hbm) and nl.store/nisa.dma_copy into it")
        if id(storage) in self.originals:
            original = self.originals[id(storage)]
            if t.arr is storage.array or t.arr.shape == storage.array.shape:
                return original
        if launch.dialect == "new" and storage.buffer is not shared_hbm:
            fail("err_output_must_be_shared_hbm",
                 "kernel outputs must be allocated with buffer=nl.shared_hbm (nl.hbm is per-instance scratch)")
        whole = t.index is None and t.arr.shape == storage.array.shape and \
            t.arr.__array_interface__["data"][0] == storage.array.__array_interface__["data"][0]
        return self.give_back(t, whole)

    def give_back(self, t: NKITensor, whole: bool) -> Any:
        """A kernel-created result (all of its storage when ``whole``) as the caller's kind of array."""
        return t.storage.array if whole else np.asarray(t.read())


_arguments: Callable[[], Arguments] = Arguments


def set_arguments(factory: Optional[Callable[[], Arguments]]) -> None:
    """Install the integration's :class:`Arguments` subclass (None: numpy arrays only again)."""
    global _arguments
    _arguments = factory or Arguments


def launch(kernel: Kernel, grid: tuple, args: tuple, kwargs: dict) -> Any:
    current = runtime.current_or_none()
    if current is not None:
        # A kernel called from inside a kernel runs inline, in the caller's launch.
        if grid:
            fail("err_nested_kernel_with_spmd_grid",
                 "a kernel with an SPMD grid cannot be launched from inside another kernel")
        return kernel.func(*args, **kwargs)
    conv = _arguments()
    cargs = tuple(conv.convert(a) for a in args)
    ckwargs = {k: conv.convert(v) for k, v in kwargs.items()}
    target = kernel.target or default_target()
    state = Launch(kernel.__name__, kernel.func, grid, kernel.dialect, target, conv.hbm_allocator())
    bound = _bind(kernel.func, cargs, ckwargs)
    if conv.requires_grad:
        conv.check_autograd(kernel)
    result = None
    with conv.launch_scope(kernel) as scope:
        t0 = time.perf_counter()
        with runtime.active(state), np.errstate(all="ignore"), blas_threads.single_threaded():
            for index, pid in enumerate(iter_grid(grid)):
                state.begin_instance(tuple(int(p) for p in pid), index)
                value = kernel.func(*cargs, **ckwargs)
                state.check_live_ranges()
                if index == 0:
                    result = value
            out = conv.result(result, state)
        wall = time.perf_counter() - t0
        kernel.last_result = LaunchResult(state, wall, tuple(s.written for s in conv.storages))
        _check_mutable(kernel.func, bound, result)
        scope.finish(state.costs)
    return out


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
