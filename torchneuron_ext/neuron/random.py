"""Per-device random number generators. They use the CPU's engine, so a seeded
program draws the same numbers on neuron as on CPU."""
from __future__ import annotations

from typing import Iterable

import torch

from .. import _C
from ._lazy import _lazy_init
from .device import DeviceLike, _get_device_index, device_count


def _generator(device: DeviceLike) -> torch.Generator:
    return _C._get_default_generator(_get_device_index(device, optional=True))


def default_generator(device: DeviceLike = None) -> torch.Generator:
    """The default torch.Generator of a neuron device."""
    return _generator(device)


def get_rng_state(device: DeviceLike = "neuron") -> torch.Tensor:
    """The RNG state of a device as a ByteTensor (on CPU)."""
    _lazy_init()
    return _generator(device).get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    """The RNG states of every device."""
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state: torch.Tensor, device: DeviceLike = "neuron") -> None:
    """Restore a device's RNG state from get_rng_state()."""
    if not isinstance(new_state, torch.Tensor) or new_state.dtype != torch.uint8:
        raise TypeError("set_rng_state expects a torch.ByteTensor returned by get_rng_state()")
    _lazy_init()
    with torch.no_grad():
        _generator(device).set_state(new_state.clone().cpu())


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    """Restore the RNG states of every device."""
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed: int) -> None:
    """Seed the current device's generator."""
    _generator(None).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seed every device's generator (torch.manual_seed calls this)."""
    for i in range(device_count()):
        _C._get_default_generator(i).manual_seed(int(seed))


def seed() -> None:
    """Seed the current device's generator with a non-deterministic number."""
    _generator(None).seed()


def seed_all() -> None:
    """Seed every device with one non-deterministic number."""
    value = _C._get_default_generator(0).seed() if device_count() else 0
    manual_seed_all(value)


def initial_seed() -> int:
    """The seed of the current device's generator."""
    return _generator(None).initial_seed()
