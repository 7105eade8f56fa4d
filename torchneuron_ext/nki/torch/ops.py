"""NKI kernels as PyTorch operators (TorchNeuron's ``nki_op`` and ``wrap_nki``).

Eagerly a kernel runs on the tensors it is given (kernel.py's launch: neuron tensors are viewed, not
copied). When PyTorch traces instead (torch.compile, fake tensors, functionalization), a launch
becomes one call of the operator ``torchneuron_ext_nki::launch`` (``launch_mutating`` when the kernel
writes into arguments): its fake kernel answers from a *plan*, worked out once per (kernel, grid,
argument shapes and dtypes, constant arguments) by running the kernel in the simulator on host
arrays, which tells the output shapes and dtypes, which arguments the kernel writes (declared as
mutated, so functionalization keeps them right) and which results are arguments handed back.
Compiled graphs then call the real kernel through that operator. Dynamo itself sees a kernel call
as one ``_launch_in_graph`` node (allowed in the graph), which AOTAutograd turns into the operator.

``nki_op("ns::name", mutates_args=...)`` makes a ``torch.library.custom_op`` of a type-annotated
wrapper (schema inferred from the annotations) and registers the wrapper as its fake kernel, so the
wrapper must only allocate outputs and launch kernels. Under torch.compile it is one opaque node;
autograd comes from ``op.register_autograd(backward, setup_context=...)``.
"""
from __future__ import annotations

import os
import threading
from typing import Any, Callable, Iterable, Optional, Union

import numpy as np
import torch

from ... import _torch_internals


def _check_dynamo_constant_marker() -> None:
    _torch_internals.source_mentions(os.path.join("_dynamo", "variables", "functions.py"), '"_dynamo_marked_constant"')
    _torch_internals.source_mentions(os.path.join("_dynamo", "decorators.py"), "fn._dynamo_marked_constant = True")


_torch_internals.register(
    "P14", "Dynamo's constant marker", "torchneuron_ext/nki/torch/ops.py (`_kernel_key`)",
    "Dynamo treating a function with `_dynamo_marked_constant = True` as assume_constant_result "
    "(set directly: importing Dynamo costs seconds)",
    "use torch._dynamo.assume_constant_result lazily, or the new marker", _check_dynamo_constant_marker)


def _check_infer_schema() -> None:
    fn = _torch_internals.attribute("torch._library.infer_schema", "infer_schema")
    _torch_internals.parameters(fn, "prototype_function", "mutates_args", label="infer_schema")


_torch_internals.register(
    "P15", "schema inference", "torchneuron_ext/nki/torch/ops.py",
    "torch._library.infer_schema.infer_schema(prototype_function, mutates_args=)",
    "nki/torch/ops.py (torch.library.infer_schema is the public alias)", _check_infer_schema)


_torch_internals.require("P14")
_torch_internals.require("P15")

from torch._library.infer_schema import infer_schema  # noqa: E402

from ..kernel import GridKernel, Kernel, launch
from .interop import numpy_to_torch_dtype, torch_to_numpy_dtype
from .tracing import digest

__all__ = ["nki_op", "wrap_nki", "NKIKernelCaller", "traced_launch", "clear_plan_cache"]

_NAMESPACE = "torchneuron_ext_nki"


# ---------------------------------------------------------------------------------------------------------
# wrap_nki
# ---------------------------------------------------------------------------------------------------------

class NKIKernelCaller:
    """``wrap_nki(kernel)``: index it with a grid and call it, eagerly or inside a traced function.

    Kernels decorated with ``nki.jit`` here are traceable as they are; ``wrap_nki`` exists so code
    written for TorchNeuron (which needs it) runs unchanged.
    """

    def __init__(self, kernel: Kernel, grid: tuple = ()) -> None:
        self.kernel, self.grid = kernel, grid

    def __getitem__(self, grid: Any) -> "NKIKernelCaller":
        return NKIKernelCaller(self.kernel, self.kernel[grid].grid)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return GridKernel(self.kernel, self.grid)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"wrap_nki({self.kernel.__name__}){list(self.grid) if self.grid else ''}"


def wrap_nki(kernel: Any) -> NKIKernelCaller:
    """``wrap_nki(kernel)[grid](*args)``: call an ``nki.jit`` kernel from PyTorch code (TorchNeuron's name)."""
    if isinstance(kernel, NKIKernelCaller):
        return kernel
    if isinstance(kernel, GridKernel):
        return NKIKernelCaller(kernel.kernel, kernel.grid)
    if isinstance(kernel, Kernel):
        return NKIKernelCaller(kernel)
    raise TypeError(
        f"wrap_nki expects a kernel decorated with @nki.jit, got {type(kernel).__name__}: decorate the kernel "
        f"function with torchneuron_ext.nki.jit (or nki.jit after torchneuron_ext.nki.compat.install())")


# ---------------------------------------------------------------------------------------------------------
# plans: what a launch does, from shapes alone
# ---------------------------------------------------------------------------------------------------------

_TENSOR = "__tensor__"  # a tensor argument in a call description: (_TENSOR, position[, shape, dtype])


def _is_slot(v: Any) -> bool:
    return type(v) is tuple and len(v) in (2, 4) and v[0] == _TENSOR


class _Plan:
    """What one (kernel, grid, call description) does: see the module docstring."""

    def __init__(self, key: str, kernel: Kernel, grid: tuple, desc: tuple, inputs: tuple, mutated: tuple,
                 layout: Any, new_outputs: tuple) -> None:
        self.key, self.kernel, self.grid, self.desc = key, kernel, grid, desc
        self.inputs, self.mutated = inputs, mutated    # tensor positions read only / written
        self.layout = layout                          # the result's structure (see _layout)
        self.new_outputs = new_outputs                # (shape, dtype) of each tensor the kernel creates


_lock = threading.Lock()
_plans_by_call: dict = {}   # (kernel, grid, desc) -> _Plan
_plans_by_key: dict = {}    # stable string key (what graphs carry) -> _Plan


def clear_plan_cache() -> None:
    """Forget cached launch plans (they are recomputed on the next traced launch)."""
    with _lock:
        _plans_by_call.clear()
        _plans_by_key.clear()


def _describe(args: tuple, kwargs: dict, tensors: list, shapes: bool = True) -> tuple:
    """A hashable description of the call: tensors become slots, constants stay (lists as tuples).

    Plain tuples, not objects, so that torch.compile can hold the description as a constant."""
    def one(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            # int() of a symbolic size specializes it: a kernel is built for concrete shapes.
            slot = (_TENSOR, len(tensors), tuple(int(s) for s in v.shape), v.dtype) if shapes \
                else (_TENSOR, len(tensors))
            tensors.append(v)
            return slot
        if isinstance(v, (list, tuple)):
            return ("__list__" if isinstance(v, list) else "__tuple__", tuple(one(x) for x in v))
        if isinstance(v, np.ndarray):
            raise TypeError("an NKI kernel traced by PyTorch takes torch tensors, not numpy arrays")
        return v
    return (tuple(one(a) for a in args), tuple((k, one(v)) for k, v in kwargs.items()))


def _rebuild(desc: tuple, values: list) -> "tuple[tuple, dict]":
    def one(v: Any) -> Any:
        if _is_slot(v):
            return values[v[1]]
        if isinstance(v, tuple) and len(v) == 2 and v[0] in ("__list__", "__tuple__"):
            items = [one(x) for x in v[1]]
            return items if v[0] == "__list__" else tuple(items)
        return v
    args, kwargs = desc
    return tuple(one(a) for a in args), {k: one(v) for k, v in kwargs}


def _plan_for(kernel: Kernel, grid: tuple, desc: tuple) -> _Plan:
    try:
        cache_key = (kernel, grid, desc)
        hash(cache_key)
    except TypeError:
        raise TypeError(
            f"NKI kernel {kernel.__name__}: non-tensor arguments are compile-time constants and must be "
            f"hashable (numbers, strings, tuples), got {desc}") from None
    plan = _plans_by_call.get(cache_key)
    if plan is None:
        plan = _make_plan(kernel, grid, desc)
        with _lock:
            _plans_by_call[cache_key] = plan
            _plans_by_key[plan.key] = plan
    return plan


def _make_plan(kernel: Kernel, grid: tuple, desc: tuple) -> _Plan:
    slots: list = []

    def collect(v: Any) -> None:
        if _is_slot(v):
            slots.append(v)
        elif isinstance(v, tuple):
            for x in v:
                collect(x)
    collect(desc)
    slots.sort(key=lambda s: s[1])
    arrays = [np.zeros(s[2], dtype=torch_to_numpy_dtype(s[3])) for s in slots]
    args, kwargs = _rebuild(desc, arrays)
    previous = kernel.last_result  # what the user's last real launch did stays visible
    try:
        result = launch(kernel, grid, args, kwargs)
        # written_arguments follows conversion order: positional arguments, then keywords, lists
        # flattened, which is the order _describe numbered the tensors in.
        written = kernel.last_result.written_arguments
    finally:
        kernel.last_result = previous
    mutated = tuple(i for i, w in enumerate(written) if w)
    inputs = tuple(i for i in range(len(arrays)) if i not in mutated)
    new_outputs: list = []
    layout = _layout(result, arrays, new_outputs, kernel)
    source = getattr(kernel.func, "__code__", None)
    code = source.co_code if source else b""
    key = f"{kernel.__name__}:{digest((kernel.__module__, kernel.__qualname__, grid, desc, code), 16)}"
    with _lock:
        other = _plans_by_key.get(key)
        if other is not None and other.kernel is not kernel:  # same code, different closure
            key = f"{key}:{id(kernel):x}"
    return _Plan(key, kernel, grid, desc, inputs, mutated, layout, tuple(new_outputs))


def _layout(value: Any, arrays: list, new_outputs: list, kernel: Kernel) -> Any:
    """The result's structure: ("created", i) for a tensor the kernel created, ("arg", j) for tensor argument j
    handed back, nested ("tuple"/"list", items), or ("const", value)."""
    if isinstance(value, np.ndarray):
        for j, a in enumerate(arrays):
            if value is a:
                return ("arg", j)
        for a in arrays:
            if np.shares_memory(value, a):
                raise NotImplementedError(
                    f"NKI kernel {kernel.__name__} returns part of an argument; under torch.compile a kernel "
                    f"may return whole arguments (the ones it updates) or new tensors")
        new_outputs.append((tuple(value.shape), numpy_to_torch_dtype(value.dtype)))
        return ("created", len(new_outputs) - 1)
    if isinstance(value, (tuple, list)):
        return ("tuple" if isinstance(value, tuple) else "list",
                tuple(_layout(v, arrays, new_outputs, kernel) for v in value))
    if value is None or isinstance(value, (bool, int, float, str)):
        return ("const", value)
    raise TypeError(f"NKI kernel {kernel.__name__} returns a {type(value).__name__}; return HBM tensors, "
                    f"tuples of them, or None")


def _assemble(layout: Any, outputs: list, tensors: list) -> Any:
    kind = layout[0]
    if kind == "created":
        return outputs[layout[1]]
    if kind == "arg":
        return tensors[layout[1]]
    if kind == "const":
        return layout[1]
    items = [_assemble(x, outputs, tensors) for x in layout[1]]
    return tuple(items) if kind == "tuple" else items


# ---------------------------------------------------------------------------------------------------------
# the operator a traced launch becomes
# ---------------------------------------------------------------------------------------------------------

_kernels_by_key: dict = {}   # Dynamo-level kernel key -> kernel
_keys_by_kernel: dict = {}


def _kernel_key(kernel: Kernel) -> str:
    """A name for the kernel that a Dynamo graph can hold (a string: stable across processes)."""
    key = _keys_by_kernel.get(kernel)
    if key is None:
        code = getattr(kernel.func, "__code__", None)
        code_hash = digest((kernel.__module__, kernel.__qualname__, kernel.dialect, code.co_code if code else b""),
                           12)
        key = f"{kernel.__module__}.{kernel.__qualname__}:{code_hash}"
        with _lock:
            if key in _kernels_by_key and _kernels_by_key[key] is not kernel:  # same code, other closure
                key = f"{key}:{id(kernel):x}"
            _kernels_by_key[key] = kernel
            _keys_by_kernel[kernel] = key
    _allow_in_graph()
    return key


# torch.compile calls these for real while tracing and uses the results as constants (what
# @assume_constant_result sets; set directly, since importing Dynamo costs seconds for eager-only users).
_kernel_key._dynamo_marked_constant = True  # type: ignore[attr-defined]

_allowed = False


def _allow_in_graph() -> None:
    """Let torch.compile put _launch_in_graph into its graph as one call (Dynamo is loaded by then)."""
    global _allowed
    if not _allowed:
        torch._dynamo.allow_in_graph(_launch_in_graph)
        _allowed = True


def traced_launch(kernel: Kernel, grid: tuple, args: tuple, kwargs: dict) -> Any:
    """A launch seen by torch.compile or a tracing mode: one ``torchneuron_ext_nki`` operator call."""
    if not _has_tensor((args, kwargs)):
        return launch(kernel, grid, args, kwargs)  # numpy arrays only: nothing for PyTorch to trace
    if torch.compiler.is_compiling():
        # Dynamo sees a call of _launch_in_graph with the tensors and constants (shapes may be symbolic
        # here); AOTAutograd then runs it on fake tensors, where it becomes the operator call below.
        key = _kernel_key(kernel)
        tensors: list = []
        desc = _describe(args, kwargs, tensors, shapes=False)
        return _launch_in_graph(key, grid, desc, *tensors)
    return _launch_with_plan(kernel, grid, args, kwargs)


def _has_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, dict):
        return any(_has_tensor(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_tensor(v) for v in value)
    return False


def _launch_in_graph(kernel_key: str, grid: tuple, desc: tuple, *tensors: torch.Tensor) -> Any:
    args, kwargs = _rebuild(desc, list(tensors))
    return _launch_with_plan(_kernels_by_key[kernel_key], grid, args, kwargs)


def _launch_with_plan(kernel: Kernel, grid: tuple, args: tuple, kwargs: dict) -> Any:
    tensors: list = []
    desc = _describe(args, kwargs, tensors)
    plan = _plan_for(kernel, grid, desc)
    read = [tensors[i] for i in plan.inputs]
    if not plan.mutated:
        outputs = _launch_op(plan.key, read)
    else:
        # Functionalization cannot handle an operator that both mutates and returns a list, so a kernel
        # that updates arguments writes its new results into buffers allocated here.
        device = tensors[0].device
        outputs = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in plan.new_outputs]
        _launch_mutating_op(plan.key, read, [tensors[i] for i in plan.mutated], outputs)
    return _assemble(plan.layout, outputs, tensors)


def _run_plan(p: _Plan, inputs: list, mutated: list) -> "tuple[list, list]":
    values: list = [None] * (len(inputs) + len(mutated))
    for i, t in zip(p.inputs, inputs):
        values[i] = t
    for i, t in zip(p.mutated, mutated):
        values[i] = t
    args, kwargs = _rebuild(p.desc, values)
    result = launch(p.kernel, p.grid, args, kwargs)
    outs: list = [None] * len(p.new_outputs)
    _collect_new(p.layout, result, outs)
    return outs, values


@torch.library.custom_op(f"{_NAMESPACE}::launch", mutates_args=())
def _launch_op(plan: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    outs, values = _run_plan(_lookup(plan), inputs, [])
    # An operator's outputs may not share memory with its inputs.
    storages = {t.untyped_storage().data_ptr() for t in values if t.numel()}
    return [o.clone() if o.numel() and o.untyped_storage().data_ptr() in storages else o for o in outs]


@_launch_op.register_fake
def _launch_fake(plan: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    p = _lookup(plan)
    device = inputs[0].device if inputs else torch.device("neuron")
    return [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in p.new_outputs]


@torch.library.custom_op(f"{_NAMESPACE}::launch_mutating", mutates_args=("mutated", "outputs"))
def _launch_mutating_op(plan: str, inputs: list[torch.Tensor], mutated: list[torch.Tensor],
                        outputs: list[torch.Tensor]) -> None:
    outs, _ = _run_plan(_lookup(plan), inputs, mutated)
    for dst, src in zip(outputs, outs):
        dst.copy_(src)


@_launch_mutating_op.register_fake
def _launch_mutating_fake(plan: str, inputs: list[torch.Tensor], mutated: list[torch.Tensor],
                          outputs: list[torch.Tensor]) -> None:
    _lookup(plan)


def _lookup(key: str) -> _Plan:
    plan = _plans_by_key.get(key)
    if plan is None:
        raise RuntimeError(
            f"no NKI launch plan '{key}' in this process: a graph calling an NKI kernel was reused without "
            f"tracing the kernel call (clear the compile caches, or call the function once eagerly)")
    return plan


def _collect_new(layout: Any, value: Any, outs: list) -> None:
    kind = layout[0]
    if kind == "created":
        outs[layout[1]] = value
    elif kind in ("tuple", "list"):
        for sub, v in zip(layout[1], value):
            _collect_new(sub, v, outs)


# ---------------------------------------------------------------------------------------------------------
# nki_op
# ---------------------------------------------------------------------------------------------------------

def nki_op(name: str, fn: Optional[Callable] = None, *,
           mutates_args: Union[str, Iterable[str]] = (), device_types: Any = None,
           schema: Optional[str] = None) -> Any:
    """Make a PyTorch custom operator of a function that launches NKI kernels (TorchNeuron's ``nki_op``).

    ``fn`` must be fully type-annotated (the schema is inferred from the annotations, as
    ``torch.library.custom_op`` does) and must only allocate its outputs and launch kernels: it is also
    the operator's fake kernel, run on fake tensors to learn output shapes. Arguments the function
    writes in place go in ``mutates_args``. The result is a ``torch.library.CustomOpDef``: call it,
    ``register_autograd(backward, setup_context=...)`` it, and use it under ``torch.compile`` (one node).

    Example::

        @nki_op("mylib::add", mutates_args=())
        def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return add_kernel[2](x, y)
    """
    if not isinstance(name, str) or "::" not in name:
        raise ValueError(f"nki_op needs a name like 'mylib::my_op', got {name!r}")

    def decorate(fn: Callable) -> Any:
        if not callable(fn) or isinstance(fn, (Kernel, GridKernel, NKIKernelCaller)):
            raise TypeError(
                "nki_op decorates a type-annotated Python function that calls NKI kernels, not the kernel "
                "itself: write def my_op(x: torch.Tensor) -> torch.Tensor: return my_kernel(x)")
        op_schema = schema
        if op_schema is None:
            try:
                op_schema = infer_schema(fn, mutates_args=mutates_args)
            except ValueError as e:
                raise ValueError(f"nki_op {name}: {e} (annotate every parameter and the return type, e.g. "
                                 f"x: torch.Tensor, eps: float, -> torch.Tensor)") from None
        op = torch.library.custom_op(name, fn, mutates_args=mutates_args, device_types=device_types,
                                     schema=op_schema)
        op.register_fake(fn)
        return op

    return decorate if fn is None else decorate(fn)
