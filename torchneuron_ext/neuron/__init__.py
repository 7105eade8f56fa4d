"""`torch.neuron`: the device module of the emulated neuron device, shaped like torch.cuda."""
from __future__ import annotations

from typing import Callable

from . import _exit  # noqa: F401  (registers the exit-time drain of autograd's device threads)
from . import amp
from ._lazy import _is_in_bad_fork, _lazy_init, init, is_initialized
from .device import (
    NeuronDeviceProperties,
    current_device,
    device,
    device_count,
    device_of,
    get_amp_supported_dtype,
    get_device_capability,
    get_device_name,
    get_device_properties,
    is_available,
    is_bf16_supported,
    set_device,
    synchronize,
)
from .memory import (
    empty_cache,
    get_hbm_capacity,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_peak_memory_stats,
    set_hbm_capacity,
)
from .random import (
    default_generator,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .streams import (Event, Stream, StreamContext, current_stream, default_stream, query, record_event, set_stream,
                      stream, wait_event, wait_stream)
from . import device as _device_mod
from .. import _torch_internals


def _check_serialization_utils() -> None:
    _torch_internals.source_mentions("serialization.py", "device_module._utils._get_device_index(location, True)")


_torch_internals.register(
    "P3", "serialization's _utils lookup", "torchneuron_ext/neuron/__init__.py (`_utils = _device_mod`)",
    "torch.serialization calling torch.neuron._utils._get_device_index(location, True) to restore neuron tensors",
    "the `_utils` alias in neuron/__init__.py (or the new lookup)", _check_serialization_utils)
_torch_internals.require("P3")
_utils = _device_mod  # torch.serialization looks up `_utils._get_device_index`

__all__ = [
    "Event", "NeuronDeviceProperties", "Stream", "StreamContext", "amp", "current_device", "current_stream",
    "default_generator", "default_stream", "device", "device_count", "device_of", "empty_cache",
    "get_amp_supported_dtype", "get_device_capability", "get_device_name", "get_device_properties",
    "get_hbm_capacity", "get_rng_state", "get_rng_state_all", "init", "initial_seed", "is_available",
    "is_bf16_supported", "is_initialized", "manual_seed", "manual_seed_all", "max_memory_allocated",
    "max_memory_reserved", "mem_get_info", "memory_allocated", "memory_reserved", "memory_snapshot",
    "memory_stats", "memory_summary", "reset_accumulated_memory_stats", "reset_max_memory_allocated",
    "reset_peak_memory_stats", "seed", "seed_all", "set_device", "set_hbm_capacity", "set_rng_state",
    "set_rng_state_all", "set_stream", "stream", "synchronize", "query", "record_event", "wait_event", "wait_stream",
    "get_dynamo_metrics", "reset_dynamo_metrics",
]


# Names the layers above provide (compiler/registration.py: Inductor's Scheduling and wrapper classes,
# which Inductor asks the device module for when it first compiles for "neuron", and TorchNeuron's
# compile-metrics functions). They register a factory rather than a value so that nothing here pulls
# Inductor into `import torch`, and the device module imports no layer above it.
_provided: dict[str, Callable[[], object]] = {}


def _provide_attribute(name: str, factory: Callable[[], object]) -> None:
    """Serve `torch.neuron.<name>` as `factory()`, computed on each lookup."""
    _provided[name] = factory


def __getattr__(name: str) -> object:
    factory = _provided.get(name)
    if factory is not None:
        return factory()
    if name == "_initialized":
        # torch.cuda's module global, which torch.utils.checkpoint reads (getattr(device_module,
        # "_initialized", False)) to decide whether to save and restore the device RNG state around
        # recomputation: without it, recomputed dropout drew new masks and gradients were wrong.
        return is_initialized()
    raise AttributeError(f"module 'torch.neuron' has no attribute '{name}'")
