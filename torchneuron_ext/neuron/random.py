"""Per-device random number generators. They use the CPU's engine, so a seeded
program draws the same numbers on neuron as on CPU; their states are 16 bytes,
(seed, offset), as TorchNeuron's and CUDA's are. Under TORCHNEURON_EXT_RNG=cpu
(see rng_source) random ops given no generator draw from the CPU's default
generator instead, as TorchNeuron's CPU-fallback random ops do."""
from __future__ import annotations

from typing import Iterable

import torch

from .. import _C
from ._lazy import _lazy_init
from .device import DeviceLike, _get_device_index, local_devices


def _generator(device: DeviceLike) -> torch.Generator:
    return _C._get_default_generator(_get_device_index(device, optional=True))


RNG_SOURCES = ("device", "cpu")


def rng_source() -> str:
    """Where random ops on neuron that are given no generator draw from (TORCHNEURON_EXT_RNG, read once, when
    the neuron runtime starts: the first use of a device).

    Returns:
        ``"device"`` (the default): the neuron device's own generator, seeded by ``torch.manual_seed`` and
        ``torch.neuron.manual_seed``, independent of the CPU's stream, as on CUDA. ``"cpu"``: the CPU's
        default generator, which they advance, as TorchNeuron's current release does (its random ops fall
        back to the CPU), so ``torch.manual_seed(0); torch.randn(n, device="neuron")`` continues the CPU's
        stream; ``torch.neuron.get_rng_state`` and its kin still work but no longer steer the draws.
        A ``torch.Generator(device="neuron")`` passed explicitly is used in both.

    Raises:
        ValueError: TORCHNEURON_EXT_RNG has another value.
    """
    _lazy_init()
    return str(_C._rng_source())


def default_generator(device: DeviceLike = None) -> torch.Generator:
    """The default torch.Generator of a neuron device."""
    return _generator(device)


def get_rng_state(device: DeviceLike = "neuron") -> torch.Tensor:
    """The RNG state of a device: 16 bytes (torch.uint8, on CPU) in TorchNeuron's and CUDA's philox layout,
    the seed (uint64) then the offset (uint64: the 32-bit draws since seeding, and in bits 48..62 where the
    CPU generator's cached normal sample was drawn). The numbers are the CPU's for one seed; layout and costs
    in docs/architecture.md (RNG parity)."""
    _lazy_init()
    return _generator(device).get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    """The RNG states of every device this process owns."""
    return [get_rng_state(i) for i in local_devices()]


def set_rng_state(new_state: torch.Tensor, device: DeviceLike = "neuron") -> None:
    """Restore a device's RNG state from get_rng_state(): exact, in O(1) for a state this process handed
    out, else rebuilt from its seed and offset (about 1 us per 624 draws). An 8-byte seed-only state and
    the CPU generator's own format are accepted too."""
    if not isinstance(new_state, torch.Tensor) or new_state.dtype != torch.uint8:
        raise TypeError("set_rng_state expects a torch.ByteTensor returned by get_rng_state() (16 bytes: "
                        f"seed and offset as two uint64), got {type(new_state).__name__}"
                        + (f" of dtype {new_state.dtype}" if isinstance(new_state, torch.Tensor) else ""))
    _lazy_init()
    with torch.no_grad():
        _generator(device).set_state(new_state.clone().cpu())


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    """Restore the RNG states of every device this process owns (in get_rng_state_all's order)."""
    for i, state in zip(local_devices(), new_states):
        set_rng_state(state, i)


def manual_seed(seed: int) -> None:
    """Seed the current device's generator."""
    _generator(None).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seed every device's generator (torch.manual_seed calls this)."""
    for i in local_devices():
        _C._get_default_generator(i).manual_seed(int(seed))


def seed() -> None:
    """Seed the current device's generator with a non-deterministic number."""
    _generator(None).seed()


def seed_all() -> None:
    """Seed every device with one non-deterministic number."""
    devices = local_devices()
    value = _C._get_default_generator(devices[0]).seed() if devices else 0
    manual_seed_all(value)


def initial_seed() -> int:
    """The seed of the current device's generator."""
    return _generator(None).initial_seed()
