"""A launch's arguments: what the caller passed, as HBM tensors, and the results given back in its kind.

The core knows numpy arrays (used as they are, without copying) and ``nt.tensor[...]`` placeholders. An
integration subclasses :class:`Arguments` for other kinds (nki/torch: CPU, neuron and fake tensors) and
registers it with :func:`set_arguments`; its launch scope is where it records the launch.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from . import dtypes, runtime
from .cost_model import Costs
from .data_address import data_address
from .errors import fail
from .memory import shared_hbm
from .runtime import Launch, Storage
from .tensor import NKITensor
from .typing import _TensorType

_input_buffer = shared_hbm  # kernel arguments live in device HBM, visible to every instance


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

    def check_autograd(self, kernel: Any) -> None:
        """Before the launch: arguments that track gradients lose them through a kernel (integration's)."""
        return None

    def launch_scope(self, kernel: Any) -> Any:
        """A context manager around the launch with ``finish(costs)``: the integration records it there."""
        return _NoScope()

    def keeps_instructions(self) -> bool:
        """Whether the launch keeps its per-instruction schedule records (nki/schedule.py) for its integration
        (a profiler that asked for them); the caller's own ``schedule.recording()`` works either way."""
        return False

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
            data_address(t.arr) == data_address(storage.array)
        return self.give_back(t, whole)

    def give_back(self, t: NKITensor, whole: bool) -> Any:
        """A kernel-created result (all of its storage when ``whole``) as the caller's kind of array."""
        return t.storage.array if whole else np.asarray(t.read())


_factory: Callable[[], Arguments] = Arguments


def set_arguments(factory: Optional[Callable[[], Arguments]]) -> None:
    """Install the integration's :class:`Arguments` subclass (None: numpy arrays only again)."""
    global _factory
    _factory = factory or Arguments


def make() -> Arguments:
    """The arguments of one launch, of the kind the registered integration handles."""
    return _factory()
