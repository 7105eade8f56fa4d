"""``torch_neuronx.neuron``: TorchNeuron's device module, as ``from torch_neuronx import neuron`` sees it.

In TorchNeuron this module is what ``torch.neuron`` is, and each function hands over to the top-level
``torch_neuronx`` function of the same name (looked up at call time). The emulator's ``torch.neuron`` is
its own module, shaped like ``torch.cuda`` (docs/torch_neuronx.md); this one keeps TorchNeuron's meanings
where they differ:

- ``get_device_name(i)`` is ``"neuron:i"`` (torch.neuron: the instance type, as torch.cuda names the GPU);
- ``memory_stats`` has TorchNeuron's flat layout (torch.neuron: torch.cuda's keys);
- ``set_device`` / ``device`` / ``get_device_properties`` raise ValueError for a device that does not exist;
- ``get_amp_supported_dtype()`` lists float32 too.

Every other name (``amp``, ``get_rng_state_all``, ``mem_get_info``, ...) is ``torch.neuron``'s.
"""
from __future__ import annotations

import sys
from typing import Any

import torch

import torchneuron_ext.neuron as _torch_neuron

from . import memory  # noqa: F401  (torch.neuron.memory.* in TorchNeuron)


def _tnx() -> Any:
    # The package this module belongs to, looked up at each call (TorchNeuron's hand-over; tests patch its
    # functions). A submodule's package is always imported before it, so this needs no import.
    return sys.modules[__name__.rpartition(".")[0]]


def is_initialized() -> bool:
    return _tnx().is_neuron_runtime_initialized()


def is_available() -> bool:
    try:
        return _tnx().device_count() > 0
    except Exception:  # noqa: BLE001  (TorchNeuron: any failure means not available)
        return False


def init() -> None:
    _tnx()._lazy_init()


def device_count() -> int:
    return _tnx().device_count()


def current_device() -> int:
    return _torch_neuron.current_device()


def set_device(device: Any) -> None:
    """Set the current device: an index, a torch.device (its index) or None (the current device)."""
    index = getattr(device, "index", device)
    if index is None:
        index = current_device()
    _tnx().set_device(index)


def get_device_name(device: Any = 0) -> str:
    """TorchNeuron's device name: ``"neuron:<index>"``; ValueError for anything but an int or torch.device."""
    if isinstance(device, torch.device):
        return str(device)
    if isinstance(device, int) and not isinstance(device, bool):
        return f"neuron:{device}"
    raise ValueError(f"Incorrect device argument found, expected torch.device or int type, found {type(device)}")


def get_device_properties(device: Any = None) -> Any:
    return _tnx().get_device_properties(str(device) if isinstance(device, torch.device) else device)


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float32, torch.float16, torch.bfloat16]


def is_bf16_supported() -> bool:
    return True


def _is_in_bad_fork() -> bool:
    return bool(_torch_neuron._is_in_bad_fork())


def device(device_spec: Any) -> Any:
    return _tnx().device(device_spec)


def synchronize(device: Any = None) -> None:
    _tnx().synchronize(device)


def Stream(**kwargs: Any) -> torch.Stream:  # noqa: N802  (TorchNeuron's spelling: a function)
    return _tnx().Stream(**kwargs)


def Event(enable_timing: bool = False, blocking: bool = False) -> torch.Event:  # noqa: N802
    return _tnx().Event(enable_timing=enable_timing, blocking=blocking)


def stream(stream: Any) -> Any:
    return _tnx().stream(stream)


def current_stream(device: Any = None) -> torch.Stream:
    return _tnx().current_stream(device)


def default_stream(device: Any = None) -> torch.Stream:
    return _tnx().default_stream(device)


def set_stream(stream: Any) -> None:
    _tnx().set_stream(stream)


def memory_stats(device: Any = None) -> dict[str, Any]:
    return _tnx().memory_stats(device)


def memory_allocated(device: Any = None) -> int:
    return _tnx().memory_allocated(device)


def max_memory_allocated(device: Any = None) -> int:
    return _tnx().max_memory_allocated(device)


def memory_reserved(device: Any = None) -> int:
    return _tnx().memory_reserved(device)


def max_memory_reserved(device: Any = None) -> int:
    return _tnx().max_memory_reserved(device)


def reset_peak_memory_stats(device: Any = None) -> None:
    _tnx().reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device: Any = None) -> None:
    _tnx().reset_accumulated_memory_stats(device)


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    return _tnx().memory_summary(device, abbreviated)


def empty_cache() -> None:
    _tnx().empty_cache()


def _sleep(cycles: int) -> None:
    """A no-op, as in TorchNeuron."""


def get_dynamo_metrics() -> Any:
    return _tnx().get_dynamo_metrics()


def reset_dynamo_metrics() -> None:
    _tnx().reset_dynamo_metrics()


def __getattr__(name: str) -> Any:
    return getattr(_torch_neuron, name)
