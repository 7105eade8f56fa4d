"""Streams and events on neuron, built on the generic torch.Stream / torch.Event.

Kernels run synchronously, so recorded work is complete when its call
returns; streams still have identities, priorities and a per-thread current
stream, and events carry timestamps for elapsed_time().
"""
from __future__ import annotations

from typing import Any, Optional

import torch

from .. import _torch_internals
from ._lazy import _lazy_init
from .device import DeviceLike, _get_device_index

_torch_internals.require("P4")


class _NeuronKind(type):
    """isinstance(x, torch.neuron.Stream) holds for any torch.Stream on neuron (likewise Event)."""

    _base: type

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, cls._base) and getattr(obj, "device", None) is not None and obj.device.type == "neuron"


class Stream(metaclass=_NeuronKind):
    """A neuron stream: `torch.neuron.Stream(device=None, priority=0)`.

    It is a plain `torch.Stream` on the neuron device, so it works everywhere
    PyTorch's generic stream API does (torch's C++ methods accept only that
    exact type, not subclasses).
    """

    _base = torch.Stream

    def __new__(cls, device: DeviceLike = None, priority: int = 0, **kwargs: Any) -> torch.Stream:  # type: ignore[misc]
        _lazy_init()
        if "stream_id" in kwargs:
            return torch.Stream(**kwargs)
        index = _get_device_index(device, optional=True)
        return torch.Stream(device=torch.device("neuron", index), priority=priority)


class Event(metaclass=_NeuronKind):
    """A neuron event: `torch.neuron.Event(enable_timing=False, blocking=False, interprocess=False)`.

    A plain `torch.Event` on the neuron device (see Stream for why).
    """

    _base = torch.Event

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> torch.Event:  # type: ignore[misc]
        if interprocess:
            raise NotImplementedError("interprocess events are not supported on the emulated neuron device")
        _lazy_init()
        return torch.Event(device=torch.device("neuron"), enable_timing=enable_timing, blocking=blocking)


def current_stream(device: DeviceLike = None) -> torch.Stream:
    """The calling thread's current stream on a device."""
    _lazy_init()
    return torch._C._accelerator_getStream(_get_device_index(device, optional=True))


def default_stream(device: DeviceLike = None) -> torch.Stream:
    """The default stream of a device."""
    _lazy_init()
    index = _get_device_index(device, optional=True)
    type_code = torch._C._accelerator_getStream(index).device_type
    return torch.Stream(stream_id=0, device_index=index, device_type=type_code)


def _require(value: Any, kind: type, fn: str, what: str) -> None:
    # torch's own methods answer a wrong type with "Unknown device: -1".
    if not isinstance(value, kind):
        raise TypeError(f"torch.neuron.{fn}() takes {what}; got {type(value).__name__}")


def wait_stream(stream: torch.Stream) -> None:
    """Make the current stream wait for `stream` (TorchNeuron's torch.neuron.wait_stream)."""
    _require(stream, torch.Stream, "wait_stream", "a stream, e.g. torch.neuron.Stream()")
    current_stream().wait_stream(stream)


def wait_event(event: torch.Event) -> None:
    """Make the current stream wait for `event` (TorchNeuron's torch.neuron.wait_event)."""
    _require(event, torch.Event, "wait_event", "an event, e.g. torch.neuron.Event()")
    current_stream().wait_event(event)


def record_event(event: Optional[torch.Event] = None) -> torch.Event:
    """Record `event` (a new one if None) on the current stream and return it."""
    if event is not None:
        _require(event, torch.Event, "record_event", "an event, e.g. torch.neuron.Event(), or None")
    return current_stream().record_event(event)


def query() -> bool:
    """Whether all work queued on the current stream has finished."""
    return current_stream().query()


def set_stream(stream: Optional[torch.Stream]) -> None:
    """Make `stream` the current stream of its device."""
    if stream is None:
        return
    _lazy_init()
    torch._C._accelerator_setStream(stream)


class StreamContext:
    """Make `stream` current (and its device current) for a block, as torch.cuda.StreamContext."""

    def __init__(self, stream: Optional[torch.Stream]):
        self.stream = stream
        self.src_prev_stream: Optional[torch.Stream] = None
        self.dst_prev_stream: Optional[torch.Stream] = None
        self.prev_device = -1

    def __enter__(self) -> Optional[torch.Stream]:
        if self.stream is None:
            return None
        from .. import _C

        _lazy_init()
        self.src_prev_stream = current_stream()
        self.prev_device = _C._current_device()
        if self.stream.device_index != self.prev_device:
            _C._set_device(self.stream.device_index)
            self.dst_prev_stream = current_stream(self.stream.device_index)
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc: Any) -> bool:
        if self.stream is None:
            return False
        from .. import _C

        if self.dst_prev_stream is not None:
            set_stream(self.dst_prev_stream)
        _C._set_device(self.prev_device)
        set_stream(self.src_prev_stream)
        return False


def stream(stream: Optional[torch.Stream]) -> StreamContext:
    """Context manager selecting a stream: `with torch.neuron.stream(s): ...`."""
    return StreamContext(stream)
