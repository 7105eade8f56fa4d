"""Dynamo's view of the neuron device (torch._dynamo.device_interface.DeviceInterface)."""
from __future__ import annotations

from typing import Any

import torch
from torch._dynamo.device_interface import DeviceInterface


class NeuronInterface(DeviceInterface):
    class Worker:
        @staticmethod
        def set_device(device: int) -> None:
            torch.neuron.set_device(device)

        @staticmethod
        def current_device() -> int:
            return torch.neuron.current_device()

        @staticmethod
        def get_device_properties(device: Any = None) -> Any:
            return torch.neuron.get_device_properties(device)

    @staticmethod
    def current_device() -> int:
        return torch.neuron.current_device()

    @staticmethod
    def set_device(device: Any) -> None:
        torch.neuron.set_device(device)

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        previous = torch.neuron.current_device()
        if device != previous:
            torch.neuron.set_device(device)
        return previous

    @staticmethod
    def exchange_device(device: int) -> int:
        return NeuronInterface.maybe_exchange_device(device)

    @staticmethod
    def device_count() -> int:
        return torch.neuron.device_count()

    @staticmethod
    def is_available() -> bool:
        return torch.neuron.is_available()

    @staticmethod
    def synchronize(device: Any = None) -> None:
        torch.neuron.synchronize(device)

    @staticmethod
    def get_raw_stream(device_index: int) -> int:
        return 0

    @staticmethod
    def get_compute_capability(device: Any = None) -> int:
        major, minor = torch.neuron.get_device_capability(device)
        return major * 10 + minor

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True

    @staticmethod
    def memory_allocated(device: Any = None) -> int:
        return torch.neuron.memory_allocated(device)
