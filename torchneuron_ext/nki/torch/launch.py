"""Kernel launches on torch tensors: CPU and neuron tensors viewed as HBM arrays, fake tensors as shapes.

kernel.py's launch knows numpy arrays only; this subclass of its :class:`Arguments` views CPU and neuron
tensors without copying, allocates kernel-created HBM tensors on the neuron device (so outputs need no
copy), hands results back as the caller's kind, warns once when gradients would be lost, and records a
launch on neuron tensors as a device kernel (DeviceActivity) inside a profiler op ``nki::<kernel>``.
"""
from __future__ import annotations

import warnings
from contextlib import ExitStack
from typing import Any

import numpy as np
import torch

from ... import _torch_internals
from ...instrumentation.activity import DeviceActivity
from ...profiler import kernel_trace
from .. import runtime
from .. import schedule as _schedule
from ..cost_model import Costs
from ..arguments import Arguments
from ..data_address import data_address
from ..kernel import Kernel
from ..tensor import NKITensor
from .interop import neuron_hbm_allocator, numpy_to_cpu_tensor, tensor_view, torch_to_numpy_dtype


_torch_internals.register(
    "P18", "fast record function", "torchneuron_ext/nki/torch/launch.py (_LaunchScope)",
    "torch._C._profiler._RecordFunctionFast (a FUNCTION-scope op that gets Kineto's correlation id)",
    "_LaunchScope in nki/torch/launch.py",
    _torch_internals.has_attributes("torch", "_C._profiler._RecordFunctionFast", "autograd._profiler_enabled"))


_warned_autograd: set = set()


def _is_fake(t: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor
    return isinstance(t, FakeTensor) or t.device.type == "meta"


class TorchArguments(Arguments):
    """Arguments that may be torch tensors: ``kind`` is numpy, cpu, neuron or meta (fake)."""

    def convert_foreign(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return self._torch(value)
        return value

    def is_array(self, value: Any) -> bool:
        return isinstance(value, np.ndarray) or type(value).__module__.startswith("torch")

    def _torch(self, t: torch.Tensor) -> NKITensor:
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
            return self._wrap(np.zeros(tuple(t.shape), dtype=torch_to_numpy_dtype(t.dtype)), t)
        return self._wrap(tensor_view(t), t)

    def hbm_allocator(self) -> runtime.HbmAllocator:
        if self.kind == "neuron":
            return neuron_hbm_allocator(self.device)
        return runtime.numpy_hbm

    def give_back(self, t: NKITensor, whole: bool) -> Any:
        storage = t.storage
        if self.kind == "neuron":
            owner = storage.owner
            if whole:
                return owner
            item = storage.array.itemsize
            offset = (data_address(t.arr) - data_address(storage.array)) // item
            return torch.as_strided(owner, t.shape, tuple(s // item for s in t.arr.strides), offset)
        array = super().give_back(t, whole)
        if self.kind in ("cpu", "meta"):
            out = numpy_to_cpu_tensor(array)
            if self.kind == "meta":
                return torch.empty(out.shape, dtype=out.dtype, device=self.device)
            return out
        return array

    def check_autograd(self, kernel: Kernel) -> None:
        """A kernel's results have no autograd history: say so once if that can lose gradients silently."""
        if not torch.is_grad_enabled() or kernel.__name__ in _warned_autograd:
            return  # (inside an nki_op with register_autograd, the forward runs with grad disabled)
        _torch_internals.require("P17")
        if torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.AutogradFunctionality):
            return  # called below autograd (e.g. from a backend kernel): autograd is handled above
        _warned_autograd.add(kernel.__name__)
        warnings.warn(
            f"NKI kernel {kernel.__name__} was called on tensors that require grad: its results have no autograd "
            f"history, so no gradient flows through it. For training, call it from an nki_op and give that op a "
            f"backward with op.register_autograd(backward, setup_context=...); under torch.no_grad() this "
            f"warning does not appear", stacklevel=4)

    def launch_scope(self, kernel: Kernel) -> "_LaunchScope":
        return _LaunchScope(kernel, self)

    def keeps_instructions(self) -> bool:
        """A launch on neuron tensors while torch.profiler runs keeps its instructions for the trace when asked
        (profiler/kernel_trace.py: TORCHNEURON_EXT_NKI_INSTRUCTIONS=1 or profiler.nki_instructions())."""
        return self.kind == "neuron" and torch.autograd._profiler_enabled() and kernel_trace.requested()


class _LaunchScope:
    """A launch on neuron tensors is a device kernel (a DeviceActivity record); one on numpy arrays is the
    simulator's alone. While torch.profiler runs, a launch on tensors is also a CPU op ``nki::<kernel>``:
    its row in key_averages, and the op the device kernel recorded inside it is correlated with (which
    fills its NEURON time)."""

    def __init__(self, kernel: Kernel, args: TorchArguments) -> None:
        on_device = args.kind == "neuron"
        self.activity = DeviceActivity(f"nki::{kernel.__name__}", "nki",
                                       (args.device.index or 0) if on_device else 0, record=on_device)
        self.kernel, self.kind = kernel, args.kind
        self.keep = args.keeps_instructions()
        self.start_ns = 0
        self._stack = ExitStack()

    def __enter__(self) -> "_LaunchScope":
        with ExitStack() as stack:
            if self.kind != "numpy" and torch.autograd._profiler_enabled():
                _torch_internals.require("P18")
                # _RecordFunctionFast opens a FUNCTION-scope op, which (unlike record_function's user scope)
                # gets the Kineto correlation id that the device kernel is recorded with.
                stack.enter_context(torch._C._profiler._RecordFunctionFast(f"nki::{self.kernel.__name__}"))
            stack.enter_context(self.activity)
            if self.keep:
                # The cores of an LNC=2 launch make their costs inside the launch: they keep records too.
                stack.enter_context(_schedule.recording())
                # The device event's own start, not a later reading: kernel_trace takes the clocks' offset from
                # it, and a reading delayed by the scheduler made earlier launches look older than the trace.
                self.start_ns = self.activity.start_ns
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._stack.__exit__(*exc)

    def finish(self, costs: Costs) -> None:
        activity = self.activity
        if activity.recording:
            activity.bytes_read, activity.bytes_written, activity.flops = \
                costs.bytes_read, costs.bytes_written, costs.flops
            # The instruction-level estimate travels with the record: the trace's projected lane uses it.
            activity.model_ns = int(costs.estimated_latency_s * 1e9)
            if self.keep:
                kernel_trace.keep_launch(self.kernel.__name__, activity.device, self.start_ns, costs.schedule)
