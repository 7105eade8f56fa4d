"""Kernels and their launch: ``nki.jit``, ``kernel[grid](...)``, simulate, baremetal, benchmark.

A launch converts the arguments to HBM tensors without copying (numpy arrays are used as they are;
CPU and neuron tensors are viewed), runs every instance of the grid in order, and hands back the
returned HBM tensors as the caller's kind: numpy arrays, CPU tensors or neuron tensors (kernel-created
HBM tensors are allocated on the neuron device in the first place). Arguments written by the kernel
are updated in place, so kernels in the outputs-passed-in style work too.
"""
from __future__ import annotations

import functools
import inspect
import sys
import time
from typing import Any, Callable, Optional

import numpy as np

from ..instrumentation.activity import DeviceActivity
from . import blas_threads, runtime
from .cost_model import Costs
from .errors import fail
from .indexing import iter_grid
from .memory import TARGETS, Target, default_target, shared_hbm
from .runtime import Launch, Storage
from .tensor import NKITensor

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
        if _under_torch_tracing():
            return _torch_traced_launch(self, (), args, kwargs)
        return launch(self, (), args, kwargs)

    def __repr__(self) -> str:
        return f"<NKI kernel {self.__name__} ({self.dialect} dialect)>"


class GridKernel:
    """``kernel[grid]``: a kernel bound to an SPMD grid (legacy) or an LNC degree (new)."""

    def __init__(self, kernel: Kernel, grid: tuple) -> None:
        self.kernel, self.grid = kernel, grid

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _under_torch_tracing():
            return _torch_traced_launch(self.kernel, self.grid, args, kwargs)
        return launch(self.kernel, self.grid, args, kwargs)

    def __repr__(self) -> str:
        return f"<NKI kernel {self.kernel.__name__}{list(self.grid)}>"


def _under_torch_tracing() -> bool:
    """True while torch.compile or a tracing mode (fake, functional, proxy) sees the call: the launch
    must then become an operator in the graph (torch_ops.py) instead of running on the tensors."""
    if runtime.current_or_none() is not None:
        return False  # a sub-kernel called inside a running kernel
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    return torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack() > 0


def _torch_traced_launch(kernel: "Kernel", grid: tuple, args: tuple, kwargs: dict) -> Any:
    from .torch_ops import traced_launch
    return traced_launch(kernel, grid, args, kwargs)


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

class _Args:
    """Kernel arguments converted to HBM tensors, and how to give results back to the caller."""

    def __init__(self) -> None:
        self.kind = "numpy"  # numpy | cpu | neuron | meta
        self.device = None
        self.originals: dict[int, Any] = {}  # id(storage) -> caller's object
        self.storages: list[Storage] = []
        self.requires_grad = False

    def convert(self, value: Any) -> Any:
        import sys
        torch = sys.modules.get("torch")
        if isinstance(value, np.ndarray):
            return self._wrap(value, value)
        if torch is not None and isinstance(value, torch.Tensor):
            return self._torch(value)
        if isinstance(value, (list, tuple)) and any(self._is_array(v) for v in value):
            return type(value)(self.convert(v) for v in value)
        from .typing import _TensorType
        if isinstance(value, _TensorType):
            return self._placeholder(value)
        return value

    def _placeholder(self, spec: Any) -> NKITensor:
        """``nt.tensor[[shape], dtype]`` as an argument (the tutorials benchmark with these instead of
        arrays): the toolchain compiles for that shape and runs on random inputs, so do we."""
        if spec.shape is None or spec.dtype is None:
            raise TypeError(f"a kernel argument given as {spec!r} needs a shape and a dtype, e.g. "
                            f"nt.tensor[[128, 512], nl.float32]")
        from . import dtypes
        dtype = dtypes.as_dtype(spec.dtype)
        shape = tuple(int(d) for d in (spec.shape if isinstance(spec.shape, (tuple, list)) else (spec.shape,)))
        values = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
        return self._wrap(dtypes.cast(values, dtype), spec)

    @staticmethod
    def _is_array(v: Any) -> bool:
        return isinstance(v, np.ndarray) or type(v).__module__.startswith("torch")

    def _wrap(self, array: np.ndarray, original: Any) -> NKITensor:
        storage = Storage(array, _input_buffer, "", 0, original)
        self.originals[id(storage)] = original
        self.storages.append(storage)
        return NKITensor(storage, array)

    def _torch(self, t: Any) -> NKITensor:
        from .interop import tensor_view
        self.requires_grad = self.requires_grad or t.requires_grad
        dev = t.device.type
        kind = {"cpu": "cpu", "neuron": "neuron", "meta": "meta"}.get(dev)
        if kind is None or _is_fake(t):
            kind = "meta" if _is_fake(t) or dev == "meta" else None
        if kind is None:
            raise TypeError(f"NKI kernels take numpy arrays, CPU tensors or neuron tensors, got a tensor on {t.device}")
        if self.kind not in ("numpy", kind) and not (kind == "meta" or self.kind == "meta"):
            raise ValueError(
                f"all tensor arguments of an NKI kernel must be on one device, got {self.device} and {t.device}: "
                f"move them with .to('neuron')")
        if self.kind != "meta":
            self.kind = kind
        self.device = t.device
        if kind == "meta":
            from .interop import torch_to_numpy_dtype
            return self._wrap(np.zeros(tuple(t.shape), dtype=torch_to_numpy_dtype(t.dtype)), t)
        return self._wrap(tensor_view(t), t)

    def hbm_allocator(self) -> runtime.HbmAllocator:
        if self.kind == "neuron":
            from .interop import neuron_hbm_allocator
            return neuron_hbm_allocator(self.device)
        return runtime.numpy_hbm

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
        if self.kind == "neuron":
            owner = storage.owner
            if whole:
                return owner
            import torch
            item = storage.array.itemsize
            offset = (t.arr.__array_interface__["data"][0] - storage.array.__array_interface__["data"][0]) // item
            return torch.as_strided(owner, t.shape, tuple(s // item for s in t.arr.strides), offset)
        array = storage.array if whole else np.asarray(t.read())
        if self.kind in ("cpu", "meta"):
            from .interop import numpy_to_cpu_tensor
            out = numpy_to_cpu_tensor(array)
            if self.kind == "meta":
                import torch
                return torch.empty(out.shape, dtype=out.dtype, device=self.device)
            return out
        return array


def _is_fake(t: Any) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor
    return isinstance(t, FakeTensor) or t.device.type == "meta"


def launch(kernel: Kernel, grid: tuple, args: tuple, kwargs: dict) -> Any:
    current = runtime.current_or_none()
    if current is not None:
        # A kernel called from inside a kernel runs inline, in the caller's launch.
        if grid:
            fail("err_nested_kernel_with_spmd_grid",
                 "a kernel with an SPMD grid cannot be launched from inside another kernel")
        return kernel.func(*args, **kwargs)
    conv = _Args()
    cargs = tuple(conv.convert(a) for a in args)
    ckwargs = {k: conv.convert(v) for k, v in kwargs.items()}
    target = kernel.target or default_target()
    state = Launch(kernel.__name__, kernel.func, grid, kernel.dialect, target, conv.hbm_allocator())
    bound = _bind(kernel.func, cargs, ckwargs)
    if conv.requires_grad:
        _warn_without_autograd(kernel)
    result = None
    # A launch on neuron tensors is a device kernel; one on numpy arrays is the simulator's alone.
    on_device = conv.kind == "neuron"
    activity = DeviceActivity(f"nki::{kernel.__name__}", "nki", (conv.device.index or 0) if on_device else 0,
                              record=on_device)
    with _profiler_scope(kernel, conv.kind), activity:
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
        if activity.recording:
            c = state.costs
            activity.bytes_read, activity.bytes_written, activity.flops = c.bytes_read, c.bytes_written, c.flops
            # The instruction-level estimate travels with the record: the trace's projected lane uses it.
            activity.model_ns = int(c.estimated_latency_s * 1e9)
    return out


_warned_autograd: set = set()


def _warn_without_autograd(kernel: Kernel) -> None:
    """A kernel's results have no autograd history: say so once if that can lose gradients silently."""
    import torch
    if not torch.is_grad_enabled() or kernel.__name__ in _warned_autograd:
        return  # (inside an nki_op with register_autograd, the forward runs with grad disabled)
    from .. import _torch_internals
    _torch_internals.require("P17")
    if torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.AutogradFunctionality):
        return  # called below autograd (e.g. from a backend kernel): autograd is handled above
    _warned_autograd.add(kernel.__name__)
    import warnings
    warnings.warn(
        f"NKI kernel {kernel.__name__} was called on tensors that require grad: its results have no autograd "
        f"history, so no gradient flows through it. For training, call it from an nki_op and give that op a "
        f"backward with op.register_autograd(backward, setup_context=...); under torch.no_grad() this "
        f"warning does not appear", stacklevel=4)


class _NoScope:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


_NO_SCOPE = _NoScope()


def _profiler_scope(kernel: Kernel, kind: str) -> Any:
    """While torch.profiler runs, a launch is a CPU op named ``nki::<kernel>``: its row in key_averages,
    and the op the device kernel recorded inside it is correlated with (which fills its NEURON time)."""
    if kind == "numpy":
        return _NO_SCOPE
    import torch
    if not torch.autograd._profiler_enabled():
        return _NO_SCOPE
    from .. import _torch_internals
    _torch_internals.require("P18")
    # _RecordFunctionFast opens a FUNCTION-scope op, which (unlike record_function's user scope) gets the
    # Kineto correlation id that the device kernel is recorded with.
    return torch._C._profiler._RecordFunctionFast(f"nki::{kernel.__name__}")


def _bind(func: Callable, args: tuple, kwargs: dict) -> inspect.BoundArguments:
    try:
        return inspect.signature(func).bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"NKI kernel {func.__name__}: {e}") from None


def _check_mutable(func: Callable, bound: inspect.BoundArguments, result: Any) -> None:
    """A parameter annotated nt.mutable_tensor that the kernel writes must be among its results."""
    from .typing import is_mutable
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
