"""Streams and events on neuron, built on the generic torch.Stream / torch.Event.

Kernels run synchronously, so recorded work is complete when its call
returns; streams still have identities, priorities and a per-thread current
stream, and events carry timestamps for elapsed_time().
"""
from __future__ import annotations

from typing import Any, Optional

import torch

from ._lazy import _lazy_init
from .device import DeviceLike, _get_device_index


class Stream(torch.Stream):
    """A neuron stream: `torch.neuron.Stream(device=None, priority=0)`."""

    def __new__(cls, device: DeviceLike = None, priority: int = 0, **kwargs: Any) -> "Stream":
        _lazy_init()
        if "stream_id" in kwargs:
            return super().__new__(cls, **kwargs)
        index = _get_device_index(device, optional=True)
        return super().__new__(cls, device=torch.device("neuron", index), priority=priority)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, torch.Stream) and super().__eq__(other)

    def __hash__(self) -> int:
        return super().__hash__()


class Event(torch.Event):
    """A neuron event: `torch.neuron.Event(enable_timing=False, blocking=False, interprocess=False)`."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> "Event":
        if interprocess:
            raise NotImplementedError("interprocess events are not supported on the emulated neuron device")
        return super().__new__(cls, device=torch.device("neuron"), enable_timing=enable_timing, blocking=blocking)


def _wrap(s: torch.Stream) -> Stream:
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


def current_stream(device: DeviceLike = None) -> Stream:
    """The calling thread's current stream on a device."""
    _lazy_init()
    return _wrap(torch._C._accelerator_getStream(_get_device_index(device, optional=True)))


def default_stream(device: DeviceLike = None) -> Stream:
    """The default stream of a device."""
    _lazy_init()
    index = _get_device_index(device, optional=True)
    type_code = torch._C._accelerator_getStream(index).device_type
    return Stream(stream_id=0, device_index=index, device_type=type_code)


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
