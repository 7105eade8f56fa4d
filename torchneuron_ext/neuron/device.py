"""Device selection and properties: torch.neuron's answer to torch.cuda's device API."""
from __future__ import annotations

import dataclasses
from typing import Any, Union

import torch

from .. import _C, _torch_internals
from ..trainium.targets import target_from_environment
from ._lazy import _lazy_init


def _check_accelerator_bindings() -> None:
    _torch_internals.attribute("torch", "_C._accelerator_getStream", "_C._accelerator_setStream",
                               "_C._accelerator_synchronizeDevice")


# Declared here, the first of its two sites to be imported (streams.py is the other).
_torch_internals.register(
    "P4", "accelerator stream bindings", "torchneuron_ext/neuron/streams.py, neuron/device.py",
    "torch._C._accelerator_getStream / _accelerator_setStream / _accelerator_synchronizeDevice",
    "neuron/streams.py and neuron/device.py (torch.accelerator may offer them publicly)",
    _check_accelerator_bindings)
_torch_internals.require("P4")

DeviceLike = Union[torch.device, str, int, None]


class InvalidDeviceError(torch.AcceleratorError, ValueError):
    """A neuron device index that does not exist: torch.AcceleratorError as on CUDA, and ValueError as
    TorchNeuron raises it (torch.neuron.device(i), set_device(i), ...)."""


def is_available() -> bool:
    """True when at least one (emulated) NeuronCore is visible."""
    return bool(local_devices())


def device_count() -> int:
    """Number of logical NeuronCores visible (NEURON_RT_NUM_CORES / NEURON_RT_VISIBLE_CORES, default 2).

    In a distributed job it is the node's process count (LOCAL_WORLD_SIZE), as on TorchNeuron, while
    this process owns only neuron:LOCAL_RANK (see local_devices)."""
    return _C._device_count()


def local_devices() -> range:
    """The device indices this process can use: range(device_count()) on one host, and only
    neuron:LOCAL_RANK in a distributed job (TorchNeuron's numbering)."""
    return range(_C._first_device(), _C._end_device())


def _get_device_index(device: DeviceLike, optional: bool = False) -> int:
    """Normalise `device` to an index on neuron; None means the current device."""
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"Expected a neuron device, but got: {device}")
        index = device.index
    elif isinstance(device, int):
        index = device
    elif device is None:
        index = None
    else:
        raise TypeError(f"Expected a torch.device, str or int for a neuron device, but got {type(device).__name__}")
    if index is None:
        if not optional:
            raise ValueError(f"Expected a neuron device with a specified index or an integer, but got: {device}")
        return current_device()
    try:
        _C._check_device(index)
    except torch.AcceleratorError as e:
        raise InvalidDeviceError(str(e)) from None
    return index


def current_device() -> int:
    """Index of the calling thread's current NeuronCore."""
    _lazy_init()
    return _C._current_device()


def set_device(device: DeviceLike) -> None:
    """Set the calling thread's current NeuronCore."""
    index = _get_device_index(device, optional=True)
    _lazy_init()
    _C._set_device(index)


class device:
    """Context manager that changes the current NeuronCore for its block."""

    def __init__(self, device: DeviceLike):
        self.idx = _get_device_index(device, optional=True) if device is not None else -1
        self.prev_idx = -1

    def __enter__(self) -> None:
        if self.idx >= 0:
            _lazy_init()
            self.prev_idx = _C._exchange_device(self.idx)

    def __exit__(self, *exc: Any) -> bool:
        if self.prev_idx >= 0:
            _C._set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of `obj` (a neuron tensor) current."""

    def __init__(self, obj: torch.Tensor):
        super().__init__(obj.get_device() if obj.device.type == "neuron" else None)


def synchronize(device: DeviceLike = None) -> None:
    """Wait for all work on the device. Kernels run synchronously, so this only validates the device."""
    _lazy_init()
    index = _get_device_index(device, optional=True)
    torch._C._accelerator_synchronizeDevice(index)


@dataclasses.dataclass(frozen=True)
class NeuronDeviceProperties:
    """What `torch.neuron.get_device_properties` reports for one logical NeuronCore."""

    name: str
    core_type: str
    total_memory: int
    physical_core_id: int
    major: int
    minor: int
    multi_processor_count: int
    emulated: bool = True

    def __repr__(self) -> str:
        return (
            f"_NeuronDeviceProperties(name='{self.name}', core_type='{self.core_type}', "
            f"total_memory={self.total_memory // (1024 * 1024)}MB, physical_core_id={self.physical_core_id}, "
            f"emulated={self.emulated})"
        )


def get_device_properties(device: DeviceLike = None) -> NeuronDeviceProperties:
    """Name, HBM capacity and identity of a logical NeuronCore of the configured Trainium target
    (trainium.targets.target_from_environment: trn2 unless NEURON_EMU_TARGET or NKI_TARGET says otherwise).

    In a distributed job the node's other cores (indices below device_count() that other processes
    own) are described too, as TorchNeuron does, with physical_core_id -1 and this core's capacity."""
    _lazy_init()
    import os

    own = None
    if isinstance(device, int) and not isinstance(device, bool) and 0 <= device < device_count() \
            and device not in local_devices():
        index, own = device, current_device()
    else:
        index = _get_device_index(device, optional=True)
    target = target_from_environment()
    return NeuronDeviceProperties(
        name=target.instance_type,
        core_type=target.core_type,
        total_memory=int(_C._hbm_capacity(index if own is None else own)),
        physical_core_id=int(_C._physical_core_id(index)) if own is None else -1,
        major=target.capability[0],
        minor=target.capability[1],
        multi_processor_count=os.cpu_count() or 1,
    )


def get_device_name(device: DeviceLike = None) -> str:
    """The instance type the emulated core belongs to."""
    return get_device_properties(device).name


def get_device_capability(device: DeviceLike = None) -> tuple[int, int]:
    """NeuronCore generation of the configured target as (major, minor): (3, 0) for NeuronCore-v3 (Trn2)."""
    _get_device_index(device, optional=True)
    return target_from_environment().capability


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """bfloat16 is Trainium's native low-precision format."""
    return True


def get_amp_supported_dtype() -> list[torch.dtype]:
    """The dtypes torch.autocast("neuron") accepts."""
    return [torch.bfloat16, torch.float16]
